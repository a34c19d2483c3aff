"""The "no model" message tells a plain install what it can run: the `local` extra comes before a
local model or `hitrate demo`, which a plain install cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitrate.harness import cli
from hitrate.harness.defaults import NoModelError, default_model


def _message(tmp_path: Path) -> str:
    env = {"HITRATE_CONFIG": str(tmp_path / "none.toml"), "HITRATE_MODELS_DIR": str(tmp_path / "models")}
    with pytest.raises(NoModelError) as info:
        default_model(env, weights_cached=lambda _: False)
    return str(info.value)


def test_a_plain_install_is_told_to_add_the_local_extra_first(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "missing_requirements", lambda extra: ["torch", "transformers"] if extra == "local" else [])
    text = _message(tmp_path)
    lines = text.splitlines()
    extra = next(i for i, line in enumerate(lines) if "pip install 'hitrate[local]'" in line)
    model = next(i for i, line in enumerate(lines) if "hitrate models install" in line)
    assert extra < model and "torch, transformers are not installed" in lines[extra]
    assert "then `hitrate demo` runs fully offline too." in text
    assert "\n`hitrate demo` runs fully offline." not in text


def test_with_the_local_extra_the_demo_is_offered_as_is(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "missing_requirements", lambda extra: [])
    text = _message(tmp_path)
    assert "hitrate[local]" not in text and text.endswith("`hitrate demo` runs fully offline.")
