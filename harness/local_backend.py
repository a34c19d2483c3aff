"""`local/<path or hub id>`: the bundled engine, loaded in this process and served on 127.0.0.1.

The engine runs behind its own HTTP server in a background thread and the harness talks to it with
the same Anthropic adapter it uses for Anthropic's API. One code path: the projection's cache
marks reach the engine as `cache_control` (where they pin the marked prefix against eviction for
their TTL), and the usage the engine reports (`cache_read_input_tokens` counted from its radix
cache) is exact.

Engine options ride on the spec as a query string, the options `hitrate serve` takes:
`local/model.gguf?threads=1&copy-budget=512&no-tune&tool-grammar=off`. The load's stages are
reported on stderr. As under `hitrate serve`, the tool grammar is on unless `tool-grammar=off`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from urllib.parse import parse_qsl

from hitrate.harness.models import ModelSpecError

log = logging.getLogger(__name__)


class LocalEngineError(ModelSpecError):
    """The local model could not be loaded or served."""


# query option -> (from_pretrained argument, parse); MiB for the copy budget, as `serve --copy-budget`
_OPTIONS = {
    "threads": ("threads", int),
    "copy-budget": ("batch_pack_bytes", lambda v: int(v) * 2**20),
    "no-tune": ("tune", lambda v: v.lower() in ("0", "false", "no")),  # `no-tune` alone: True -> tune=False
    "max-batch": ("max_batch", int),
    "pool-tokens": ("pool_tokens", int),
    "dtype": ("dtype", str),  # e.g. float32 for a .gguf dequantized on load (default: gguf, as shipped)
    # the chat service's, not the load's: `serve --tool-grammar auto|off`
    "tool-grammar": ("tool_grammar", lambda v: v == "auto"),
}
_SERVICE_OPTIONS = ("tool_grammar",)
_CHOICES = {"tool-grammar": ("auto", "off")}
_LEAST = {"threads": 1, "copy-budget": 0, "max-batch": 1, "pool-tokens": 1}


def split_options(ref: str) -> tuple[str, dict]:
    """`path?threads=1&no-tune` -> (path, from_pretrained's and the chat service's arguments); a
    clear error for an option it does not know or a value it does not take."""
    path, _, query = ref.partition("?")
    options: dict = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in _OPTIONS:
            raise LocalEngineError(f"local/{ref}: unknown option {name!r}; known: {', '.join(_OPTIONS)}")
        argument, parse = _OPTIONS[name]
        if name in _LEAST and not (value.isdigit() and int(value) >= _LEAST[name]):
            raise LocalEngineError(f"local/{ref}: {name} takes a whole number of at least {_LEAST[name]}, got {value!r}")
        if name in _CHOICES and value not in _CHOICES[name]:
            raise LocalEngineError(f"local/{ref}: {name} takes {' or '.join(_CHOICES[name])}, got {value!r}")
        options[argument] = parse(value)
    return path, options


class LocalEngineServer:
    """Load `model_ref` with transformers and serve it on a free port of 127.0.0.1."""

    def __init__(
        self,
        model_ref: str,
        *,
        dtype: str | None = None,
        device: str | None = None,
        pool_tokens: int | None = None,
        default_max_tokens: int = 1024,
    ) -> None:
        self.model_ref = model_ref
        self._dtype = dtype
        self._device = device
        self._pool_tokens = pool_tokens
        self._default_max_tokens = default_max_tokens
        self._thread = None
        self.engine = None
        self.service = None

    @property
    def url(self) -> str:
        if self._thread is None:
            raise RuntimeError("the local engine server is not running")
        return self._thread.url

    def start(self) -> str:
        """Load the model, start the server, return its base URL."""
        if self._thread is not None:
            return self.url
        ref, options = split_options(self.model_ref)
        service_options = {"tool_grammar": True, **{k: options.pop(k) for k in _SERVICE_OPTIONS if k in options}}
        folder = Path(ref).expanduser()
        is_path = folder.exists()
        if ref.startswith(("/", "./", "../", "~")) and not is_path:
            raise LocalEngineError(f"local/{ref}: could not load model: no model folder at {folder}")
        try:
            from hitrate.engine.api import EngineError
            from hitrate.engine.load_progress import LoadProgress
            from hitrate.engine.runner import TransformersEngine
            from hitrate.engine.server import create_app
            from hitrate.engine.server_thread import ServerThread
            from hitrate.engine.serving import ChatService
        except ImportError as exc:  # torch / transformers / fastapi are the `local` extra
            raise LocalEngineError(
                f"local models need the engine's dependencies ({exc.name} is missing): "
                "pip install 'hitrate[local]'"
            ) from exc
        try:
            self.engine = TransformersEngine.from_pretrained(
                str(folder) if is_path else ref,
                device=self._device,
                model_name=self.model_ref,
                local_files_only=is_path,
                progress=LoadProgress(sys.stderr),
                **{"dtype": self._dtype, "pool_tokens": self._pool_tokens, **options},
            )
        except EngineError as exc:
            hint = "" if is_path else " (a hub id needs network access on first use, or the weights in the local cache)"
            raise LocalEngineError(f"local/{self.model_ref}: {exc}{hint}") from exc
        # The harness asks for a fixed max_tokens (`--max-output-tokens`) without counting the
        # prompt; the engine knows the context window, so it lowers max_tokens to the room left
        # rather than failing a long session on a small model.
        service = ChatService(self.engine, default_max_tokens=self._default_max_tokens, cap_max_tokens=True,
                              **service_options)
        self.service = service
        app = create_app(self.engine, service=service, served_model_names=[self.model_ref])
        self._thread = ServerThread(app).start()
        log.info("local engine for %s serving at %s", self.model_ref, self._thread.url)
        return self._thread.url

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def metrics(self) -> dict[str, float]:
        return self.engine.metrics() if self.engine is not None else {}
