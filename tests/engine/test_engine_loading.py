"""Where a model is loaded from and onto what: a mistyped folder, a folder that is not a checkpoint,
a device this machine lacks and an unknown dtype each get one clear EngineError before transformers
is asked (and in `hitrate serve`, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hitrate.engine.api import EngineError
from hitrate.engine.loading import device_map_for, looks_like_path, resolve_source, resolve_target
from hitrate.engine.runner import TransformersEngine

HITRATE = str(Path(sys.executable).with_name("hitrate"))
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.mark.parametrize("ref", ["/models/x", "./x", "../x", "~/x", ".", "C:\\models\\x"])
def test_path_spellings_are_paths(ref):
    assert looks_like_path(ref)


@pytest.mark.parametrize("ref", ["Qwen/Qwen2.5-0.5B", "gpt2", "org/name-v1.5"])
def test_hub_ids_are_left_to_the_hub(ref, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing of that name on disk here
    assert resolve_source(ref) == (ref, False)


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(EngineError, match=f"could not load model .*no model folder at {tmp_path / 'nope'}"):
        resolve_source(str(tmp_path / "nope"))


def test_a_folder_without_config_is_not_a_model(tmp_path):
    (tmp_path / "main.py").write_text("print(1)\n")
    with pytest.raises(EngineError, match="is not a transformers model folder \\(it has no config.json\\)"):
        TransformersEngine.from_pretrained(tmp_path)


def test_a_file_is_not_a_model_folder(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\0")
    with pytest.raises(EngineError, match="is a file; give the folder"):
        resolve_source(weights)


def test_home_relative_folders_are_expanded(tiny_llama_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tiny_llama_path.parent))
    source, is_folder = resolve_source(f"~/{tiny_llama_path.name}")
    assert is_folder and source == str(tiny_llama_path)


@pytest.mark.parametrize("device, message", [("tpu", "unknown device 'tpu'"), ("warp9", "unknown device 'warp9'")])
def test_unknown_devices_are_refused(device, message):
    with pytest.raises(EngineError, match=message):
        resolve_target(device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_machine_without_it_says_so(tiny_llama_path):
    with pytest.raises(EngineError, match="CUDA is not available on this machine"):
        TransformersEngine.from_pretrained(tiny_llama_path, device="cuda")
    assert device_map_for(torch.device("cpu")) is None


def test_unknown_dtype_is_an_engine_error(tiny_llama_path):
    with pytest.raises(EngineError, match="unknown dtype 'float64'"):
        TransformersEngine.from_pretrained(tiny_llama_path, dtype="float64")


def test_device_map_needs_accelerate():
    """transformers refuses any device_map without `accelerate`; the engine then loads and moves."""
    from transformers.utils import is_accelerate_available

    expected = "cuda:0" if is_accelerate_available() else None
    assert device_map_for(torch.device("cuda:0")) == expected


def test_engine_counters_are_whole_numbers(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=256)
    metrics = engine.metrics()
    assert isinstance(metrics["hit_rate"], float)
    assert all(type(v) is int for k, v in metrics.items() if k != "hit_rate"), metrics


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--device", "tpu"], "error: unknown device 'tpu'"),
    (["--dtype", "float64"], "error: unknown dtype 'float64'"),
])
def test_serve_refuses_bad_device_and_dtype_without_a_traceback(tiny_llama_path, args, message):
    result = subprocess.run([HITRATE, "serve", str(tiny_llama_path), *args], capture_output=True, text=True,
                            env=OFFLINE, timeout=180)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_loading_is_quiet_unless_verbose(tiny_llama_path, capfd):
    from transformers.utils import logging as hf_logging

    TransformersEngine.from_pretrained(tiny_llama_path, device="cpu")
    quiet = capfd.readouterr()
    assert "Loading weights" not in quiet.err + quiet.out
    assert hf_logging.is_progress_bar_enabled()  # the setting is restored after the load
    TransformersEngine.from_pretrained(tiny_llama_path, device="cpu", verbose=True)
    assert "Loading weights" in capfd.readouterr().err
