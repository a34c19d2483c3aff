"""Model loading runs off the main thread (so the main thread keeps no OpenMP pool that slows the
scheduler's decode steps; see engine/compute_thread.py), with its result and errors intact."""

from __future__ import annotations

import threading

import pytest

from hitrate.engine import compute_thread
from hitrate.engine.api import EngineError
from hitrate.engine.runner import TransformersEngine


def test_work_runs_on_another_thread_and_its_errors_come_back():
    seen = []
    assert compute_thread.off_main_thread(lambda: seen.append(threading.current_thread().name) or 7) == 7
    assert seen == ["engine-load"]

    def fail():
        raise ValueError("bad weights")

    with pytest.raises(ValueError, match="bad weights"):
        compute_thread.off_main_thread(fail)
    # Already off the main thread: it runs right there.
    names = []
    worker = threading.Thread(target=lambda: names.append(compute_thread.off_main_thread(lambda: threading.current_thread().name)), name="w")
    worker.start()
    worker.join()
    assert names == ["w"]


def test_from_pretrained_loads_on_its_own_thread(tiny_llama_path, monkeypatch):
    threads = []
    real_init = TransformersEngine.__init__

    def spy(self, *args, **kwargs):  # the engine is built (weights packed) where the model loads
        threads.append(threading.current_thread().name)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(TransformersEngine, "__init__", spy)
    engine = TransformersEngine.from_pretrained(tiny_llama_path)
    assert threads == ["engine-load"] and engine.vocab_size > 0
    with pytest.raises(EngineError, match="could not load model"):
        TransformersEngine.from_pretrained(tiny_llama_path / "missing-folder")
