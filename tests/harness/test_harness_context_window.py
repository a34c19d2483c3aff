"""Each model's window is known: the session's setting, else what a self-hosted server reports in
`/v1/models` (vLLM's `max_model_len`, the bundled engine), else the price table's
`max_input_tokens`; and the config file's `[compaction]` table sets the defaults."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scripted_model import scripted_route

from hitrate.harness.compaction_settings import CompactionSettingsError, load_compaction_settings
from hitrate.harness.context_window import input_window, served_context_window, window_of_entry
from hitrate.harness.events import EventList
from hitrate.harness.session import Session, SessionConfig
from hitrate.store.prices import PriceTable

# vLLM's documented `GET /v1/models` answer (vllm/entrypoints/openai/protocol.py ModelCard).
VLLM_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "object": "model",
            "created": 1764581234,
            "owned_by": "vllm",
            "root": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "parent": None,
            "max_model_len": 16384,
            "permission": [],
        }
    ],
}


class _ModelsServer:
    """Answers GET /v1/models with a fixed body; counts the requests."""

    def __init__(self, body: dict) -> None:
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                outer.hits += 1
                data = json.dumps(body).encode()
                self.send_response(200 if self.path.endswith("/models") else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    def __enter__(self) -> "_ModelsServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_vllm_max_model_len_is_read_with_the_openai_sdk() -> None:
    with _ModelsServer(VLLM_MODELS) as server:
        assert served_context_window(server.url, "Qwen/Qwen2.5-Coder-7B-Instruct") == 16384
        # The only model served counts even when the route names it differently (a served alias).
        assert served_context_window(server.url, "coder") == 16384


def test_a_server_that_says_nothing_gives_no_window() -> None:
    body = {"object": "list", "data": [{"id": "a", "object": "model"}, {"id": "b", "object": "model"}]}
    with _ModelsServer(body) as server:
        assert served_context_window(server.url, "a") is None
        assert served_context_window(server.url, "c") is None
    assert served_context_window("http://127.0.0.1:9/v1", "a", timeout_s=1) is None  # nothing listening
    assert window_of_entry({"max_model_len": True}) is None and window_of_entry({"max_context": 0}) is None


def test_the_output_budget_is_set_aside_from_a_served_window() -> None:
    assert input_window(16384, 4096) == 12288
    assert input_window(2048, 4096) == 1536  # never more than a quarter of a small window


def _session(route, workspace, ledger, **config) -> Session:
    return Session(route, workspace, ledger=ledger, sink=EventList(), context=lambda: {"date": "d"},
                   config=SessionConfig(**config), sleep=lambda s: None)


def test_the_session_reads_its_servers_window_once(workspace, ledger) -> None:
    with _ModelsServer(VLLM_MODELS) as server:
        route = scripted_route([])
        route.spec = route.spec.model_copy(update={"base_url": server.url})
        session = _session(route, workspace, ledger, max_output_tokens=1024)
        assert session.context_window() == 16384 - 1024
        assert session.context_window() == 16384 - 1024
        assert server.hits == 1
        assert _session(route, workspace, ledger, context_window=5000).context_window() == 5000  # the setting wins
        # Without a configured output budget, the session's default one is set aside (at most a quarter).
        default = _session(route, workspace, ledger)
        assert default.context_window() == 16384 - min(default.max_output_tokens, 4096)


def test_cloud_models_take_the_price_tables_window(workspace, ledger) -> None:
    table = PriceTable.default()
    known = next(m for m in table.models if m.max_input_tokens and m.provider == "anthropic")
    route = scripted_route([], model=known.model)
    route.spec = route.spec.model_copy(update={"provider": "anthropic"})  # not self-hosted: no /v1/models asked
    session = Session(route, workspace, ledger=ledger, sink=EventList(), price_table=table, context=lambda: {})
    assert session.context_window() == known.max_input_tokens


def test_the_bundled_engine_lists_max_model_len(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from hitrate.engine.tiny import build_tiny_model
    from hitrate.harness.local_backend import LocalEngineServer

    folder = build_tiny_model(tmp_path / "m", "llama", vocab_size=512, hidden=16, layers=1, heads=2, kv_heads=1,
                              max_positions=3000, seed=0)
    server = LocalEngineServer(str(folder))
    url = server.start()
    try:
        assert served_context_window(f"{url}/v1", str(folder)) == 3000
    finally:
        server.stop()


def test_a_local_route_knows_its_window_from_its_server(tmp_path: Path, workspace, ledger) -> None:
    pytest.importorskip("torch")
    from hitrate.engine.tiny import build_tiny_model
    from hitrate.harness.router import Router

    folder = build_tiny_model(tmp_path / "m", "llama", vocab_size=512, hidden=16, layers=1, heads=2, kv_heads=1,
                              max_positions=3000, seed=0)
    route = Router(env={}).resolve(f"local/{folder}")
    try:
        assert _session(route, workspace, ledger, max_output_tokens=100).context_window() == 2900
    finally:
        route.close()


def test_the_config_files_compaction_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert load_compaction_settings(path).mode == "client"
    path.write_text('[compaction]\nmode = "native"\nat = 0.6\ncontext_window = 32000\nclear_tool_results = false\n')
    settings = load_compaction_settings(path)
    assert (settings.mode, settings.at, settings.context_window, settings.clear_tool_results) == ("native", 0.6, 32000, False)
    path.write_text('[compaction]\nmode = "sometimes"\n')
    with pytest.raises(CompactionSettingsError, match="mode"):
        load_compaction_settings(path)
    path.write_text('compaction = 3\n')
    with pytest.raises(CompactionSettingsError, match="must be a table"):
        load_compaction_settings(path)


def test_run_takes_the_config_files_compaction_keys(tmp_path: Path, monkeypatch) -> None:
    from hitrate.harness.commands.run import session_config

    path = tmp_path / "config.toml"
    path.write_text('[compaction]\nmode = "off"\nat = 0.5\ncontext_window = 9000\n')
    monkeypatch.setenv("HITRATE_CONFIG", str(path))
    config = session_config(100, None, None, None, None)
    assert (config.compaction, config.compact_at, config.context_window, config.clear_tool_results) == ("off", 0.5, 9000, True)
    config = session_config(100, 7000, 0.7, "native", False)
    assert (config.compaction, config.compact_at, config.context_window, config.clear_tool_results) == ("native", 0.7, 7000, False)
