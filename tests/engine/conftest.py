"""Session-scoped tiny random models for engine tests, built offline with `hitrate.engine.tiny`.

Each fixture returns the folder of a saved model + tokenizer, loadable with `from_pretrained`
exactly like a real checkpoint. Models are built once per test session and per architecture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from hitrate.engine.tiny import build_tiny_model

# Small enough that a forward pass over a few hundred tokens takes milliseconds on 2 CPU cores.
TINY_SHAPE = dict(vocab_size=512, hidden=64, layers=2, heads=4, kv_heads=2, seed=0)


@pytest.fixture(autouse=True)
def decode_tuning_cache(tmp_path, monkeypatch) -> Path:
    """Each test's own decode-tuning cache: no test reads a choice another run (or a user's
    start) left in the user cache folder."""
    folder = tmp_path / "decode-tuning"
    monkeypatch.setenv("HITRATE_TUNING_CACHE", str(folder))
    return folder


@pytest.fixture(scope="session")
def tiny_model_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """`factory(arch="llama", **overrides) -> Path`; identical requests share one folder."""
    built: dict[tuple, Path] = {}

    def factory(arch: str = "llama", **overrides) -> Path:
        key = (arch, tuple(sorted((k, repr(v)) for k, v in overrides.items())))
        if key not in built:
            folder = tmp_path_factory.mktemp(f"tiny-{arch}")
            built[key] = build_tiny_model(folder, arch, **{**TINY_SHAPE, **overrides})
        return built[key]

    return factory


@pytest.fixture(scope="session")
def tiny_llama_path(tiny_model_factory) -> Path:
    return tiny_model_factory("llama")


@pytest.fixture(scope="session")
def tiny_qwen2_path(tiny_model_factory) -> Path:
    return tiny_model_factory("qwen2")


@pytest.fixture(scope="session")
def tiny_gpt2_path(tiny_model_factory) -> Path:
    return tiny_model_factory("gpt2")


@pytest.fixture(scope="session")
def tiny_phi3_path(tiny_model_factory) -> Path:
    return tiny_model_factory("phi3")


@pytest.fixture(scope="session", params=["llama", "qwen2", "gpt2", "phi3"])
def tiny_model_path(request, tiny_model_factory) -> Path:
    """Parametrised over the architectures verified exact under prefix caching."""
    return tiny_model_factory(request.param)
