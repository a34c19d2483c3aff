"""Where a model is loaded from and onto which device, checked before transformers is asked.

transformers answers a mistyped folder with a hub-id validation error, a folder that holds no
checkpoint with advice about sentencepiece, and a device this machine lacks with a stack trace or
a request to install `accelerate`. These checks turn each of those into one line that names the
actual problem.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from hitrate.engine import memory_budget, modelinfo
from hitrate.engine.api import EngineError

_PATH_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")
# `--dtype` names for a GGUF file's weights as shipped (quantized blocks kept).
AS_SHIPPED_NAMES = ("gguf", "as-shipped")


def looks_like_path(ref: str) -> bool:
    """A reference written as a filesystem path rather than a hub id ("org/name" is a hub id)."""
    return ref in (".", "..") or ref.startswith(_PATH_PREFIXES) or (len(ref) > 2 and ref[1] == ":" and ref[2] in "\\/")


def gguf_path(ref: str | Path) -> Path | None:
    """The GGUF file `ref` names, if it names one (`model.gguf` on disk); `engine.gguf_load` loads it."""
    path = Path(str(ref)).expanduser()
    if path.suffix.lower() != ".gguf":
        return None
    if not path.is_file():
        raise EngineError(f"could not load model {str(ref)!r}: no GGUF file at {path}")
    return path


def gguf_chat_template(path: Path) -> str | None:
    """The chat template stored in a GGUF's metadata (`tokenizer.chat_template`, the key llama.cpp
    reads); the engine's own GGUF tokenizer carries it already."""
    from hitrate.engine.gguf_load.reader import GGUFFile

    template = GGUFFile(path).metadata.get("tokenizer.chat_template")
    return template if isinstance(template, str) and template else None


def gguf_weights_dtype(dtype: str | torch.dtype | None, target: torch.device) -> torch.dtype | None:
    """What a GGUF file's weights become: None keeps them as shipped (`--dtype gguf`, the default
    on the CPU: quantized matrices stay in their blocks and the quantized kernels multiply them);
    a float dtype dequantizes every tensor to it (float32: the exact reference). The quantized
    kernels run on the CPU, so on a GPU the default is that device's float dtype."""
    if isinstance(dtype, str) and dtype.lower() in AS_SHIPPED_NAMES:
        if target.type != "cpu":
            raise EngineError(f"--dtype {dtype}: the quantized kernels run on the CPU; on {target} use "
                              "--dtype bfloat16 or float32 (dequantized on load)")
        return None
    if dtype in (None, "auto"):
        return None if target.type == "cpu" else resolve_dtype(None, target)
    return resolve_dtype(dtype, target)


def load_gguf_model(path: Path, dtype: torch.dtype | None, *, pool_tokens: int | None, default_pool_bytes: int,
                    copy_bytes: int, available: int | None = None):
    """`engine.gguf_load.LoadedGGUF` of `path`, after checking that its weights (as they will sit
    in memory), the K/V pool (`pool_tokens`, else `default_pool_bytes`) and `copy_bytes` of weight
    copies fit the memory available (`engine.memory_budget`; `available` overrides the measurement)."""
    from hitrate.engine.gguf_load.loader import load_gguf
    from hitrate.engine.gguf_load.model import GGUFModelError
    from hitrate.engine.gguf_load.reader import GGUFFormatError
    from hitrate.engine.quant import UnsupportedQuantType

    def check(weight_bytes: int, config) -> None:
        kv_dtype = dtype or torch.float32
        pool = (default_pool_bytes if pool_tokens is None
                else pool_tokens * memory_budget.kv_bytes_per_token(config, kv_dtype))
        memory_budget.check(memory_budget.MemoryPlan(weights=weight_bytes, pool=pool, copies=copy_bytes,
                                                     dequantized=dtype is not None), available)

    try:
        return load_gguf(path, dtype, before_build=check)
    except (GGUFFormatError, GGUFModelError, UnsupportedQuantType, OSError) as exc:
        raise EngineError(f"could not load model {str(path)!r}: {exc}") from exc


def resolve_source(ref: str | Path) -> tuple[str, bool]:
    """(what to pass to from_pretrained, whether it is a local folder).

    A reference that exists on disk, or is written as a path, must be a model folder: one with a
    config.json. Anything else is left to the hub (or its local cache)."""
    text = str(ref)
    path = Path(text).expanduser()
    if not (isinstance(ref, Path) or path.exists() or looks_like_path(text)):
        return text, False
    if not path.exists():
        raise EngineError(f"could not load model {text!r}: no model folder at {path}")
    if not path.is_dir():
        raise EngineError(f"could not load model {text!r}: {path} is a file; give the folder that holds config.json "
                          "and the weights, or a .gguf file")
    if not (path / "config.json").is_file():
        raise EngineError(
            f"could not load model {text!r}: {path} is not a transformers model folder (it has no config.json)"
        )
    return str(path), True


def resolve_target(device: str | torch.device | None) -> torch.device:
    """The torch device to run on, refused with a clear message when this machine does not have it."""
    try:
        target = modelinfo.resolve_device(device)
    except (RuntimeError, ValueError) as exc:
        raise EngineError(f"unknown device {str(device)!r}; use cpu, cuda, cuda:N or mps") from exc
    if target.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise EngineError(f"device {str(device)!r}: CUDA is not available on this machine (torch {torch.__version__}, {build})")
        count = torch.cuda.device_count()
        if target.index is not None and target.index >= count:
            raise EngineError(f"device {str(device)!r}: this machine has {count} CUDA device(s), numbered from 0")
    if target.type == "mps" and not torch.backends.mps.is_available():
        raise EngineError(f"device {str(device)!r}: MPS is not available on this machine")
    return target


def resolve_dtype(dtype: str | torch.dtype | None, target: torch.device) -> torch.dtype:
    if isinstance(dtype, str) and dtype.lower() in AS_SHIPPED_NAMES:
        raise EngineError(f"--dtype {dtype} keeps a .gguf file's weights as shipped; this model is not a .gguf file")
    try:
        return modelinfo.resolve_dtype(dtype, target)
    except ValueError as exc:
        raise EngineError(str(exc)) from exc


def device_map_for(target: torch.device) -> str | None:
    """`device_map` for from_pretrained: straight onto the GPU where `accelerate` is installed.

    transformers refuses any device_map without `accelerate`, which the engine does not require;
    without it the model is loaded on the host and moved with `.to(target)` afterwards."""
    if target.type != "cuda":
        return None
    from transformers.utils import is_accelerate_available

    return str(target) if is_accelerate_available() else None


@contextmanager
def quiet_transformers(verbose: bool = False) -> Iterator[None]:
    """While loading, no transformers progress bars ("Loading weights ...") or info and warning
    logs: they would land in the middle of a command's own output. `verbose` keeps them. The
    previous settings come back afterwards."""
    if verbose:
        yield
        return
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    # The GGUF loader draws its "de-quantizing" bar with plain tqdm, which ignores the switch above.
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_loader
    except ImportError:
        gguf_loader = None
    gguf_bar = getattr(gguf_loader, "tqdm", None)
    if gguf_bar is not None:
        gguf_loader.tqdm = functools.partial(gguf_bar, disable=True)
    try:
        yield
    finally:
        if gguf_bar is not None:
            gguf_loader.tqdm = gguf_bar
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
