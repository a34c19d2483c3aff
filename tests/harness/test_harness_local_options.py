"""`local/` specs carry the engine's options as a query string (`?threads=1&no-tune&copy-budget=512`),
the same options `hitrate serve` takes, and a spec with an option it does not know is a clear error."""

from __future__ import annotations

import pytest

from hitrate.harness.local_backend import LocalEngineError, LocalEngineServer, split_options


def test_the_query_string_becomes_the_engines_options():
    assert split_options("/m/model.gguf") == ("/m/model.gguf", {})
    assert split_options("/m/model.gguf?threads=2&no-tune&copy-budget=512&max-batch=4") == (
        "/m/model.gguf", {"threads": 2, "tune": False, "batch_pack_bytes": 512 * 2**20, "max_batch": 4})
    assert split_options("org/name?no-tune=0")[1] == {"tune": True}
    assert split_options("m.gguf?tool-grammar=off")[1] == {"tool_grammar": False}
    assert split_options("m.gguf?tool-grammar=auto")[1] == {"tool_grammar": True}
    for bad, said in [("m?threads=0", "threads takes a whole number of at least 1"),
                      ("m?copy-budget=lots", "copy-budget takes a whole number"),
                      ("m?tool-grammar=on", "tool-grammar takes auto or off, got 'on'"),
                      ("m?thread=2", "unknown option 'thread'; known: threads, copy-budget, no-tune, max-batch")]:
        with pytest.raises(LocalEngineError, match=said):
            split_options(bad)


@pytest.mark.slow
def test_a_local_spec_loads_with_its_options(tmp_path, monkeypatch, capfd):
    from hitrate.engine import cpu_threads
    from hitrate.engine.tiny import build_tiny_model

    monkeypatch.setenv("HITRATE_TUNING_CACHE", str(tmp_path / "tuning"))
    model = build_tiny_model(tmp_path / "tiny", "llama", vocab_size=512, hidden=32, layers=2, heads=4, kv_heads=2)
    server = LocalEngineServer(f"{model}?threads=1&no-tune&max-batch=2")
    try:
        server.start()
        engine = server.engine
        assert engine.max_batch == 2 and engine.step_layouts.source == "not tuned"
        assert server.service.tool_grammar is True  # on by default, as under `hitrate serve`
        assert cpu_threads.policy().fixed == 1
    finally:
        server.stop()
        cpu_threads.configure(None)
    stderr = capfd.readouterr().err
    assert "load: read" in stderr and "load: tuning" in stderr and "load: ready" in stderr


@pytest.mark.slow
def test_a_local_spec_can_turn_the_tool_grammar_off(tmp_path, monkeypatch):
    from hitrate.engine.tiny import build_tiny_model

    monkeypatch.setenv("HITRATE_TUNING_CACHE", str(tmp_path / "tuning"))
    model = build_tiny_model(tmp_path / "tiny", "llama", vocab_size=512, hidden=32, layers=2, heads=4, kv_heads=2)
    server = LocalEngineServer(f"{model}?no-tune&tool-grammar=off")
    try:
        server.start()
        assert server.service.tool_grammar is False
    finally:
        server.stop()
