"""`hitrate engine verify MODEL` on tiny models: exactness, K/V groups, QK products saved and K/V
bytes per token, checked against independent counts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hitrate.engine import cpu_linear, decode_tuning, huge_pages
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.verify import verify

SLIDING = {"sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"]}


def brute_force_qk(n: int, start: int, windows: list, heads: int) -> int:
    """Count every (query, key) pair a layer scores, one pair at a time."""
    pairs = 0
    for window in windows:
        for q in range(start, n):
            pairs += sum(1 for k in range(q + 1) if window is None or k > q - window)
    return pairs * heads


@pytest.mark.parametrize("arch", ["llama", "gemma3_sliding"])
def test_verify_reports_exactness_groups_savings_and_bytes(tiny_model_factory, arch):
    path = (tiny_model_factory("gemma3_text", config_overrides=SLIDING) if arch == "gemma3_sliding"
            else tiny_model_factory("llama"))
    report = verify(TransformersEngine.from_pretrained(path, pool_tokens=4096))
    assert report.max_logit_diff <= 1e-4
    assert report.cached_tokens == report.prompt_tokens // 2  # everything before the edit
    assert (report.query_heads, report.kv_heads, report.kv_groups) == (4, 2, 2)
    windows = [16, None] if arch == "gemma3_sliding" else [None, None]
    n = report.variant_tokens
    assert report.qk_products_full == brute_force_qk(n, 0, windows, 4)
    assert report.qk_products_computed == brute_force_qk(n, report.cached_tokens, windows, 4)
    per_layer = 2 * 2 * 16 * 4  # K and V, 2 heads, head_dim 16, fp32
    assert report.kv_bytes_per_token_accounted == 2 * per_layer
    if arch == "gemma3_sliding":  # the sliding layer needs 16 positions, not all of them
        assert report.kv_bytes_per_token_at_prompt == pytest.approx(per_layer * (1 + 16 / report.prompt_tokens))
        assert report.kv_bytes_per_token_at_context < report.kv_bytes_per_token_at_prompt
        # The pool holds the full layer for every cached token, the sliding one for two windows
        # (the prompt's end and the variant's): far below every layer at every position.
        cached = report.prompt_tokens + report.variant_tokens - report.cached_tokens
        assert report.kv_bytes_per_cached_token == (cached * per_layer + 2 * 16 * per_layer) // cached
    else:
        assert report.kv_bytes_per_token_at_prompt == report.kv_bytes_per_token_at_context == 2 * per_layer
        assert report.kv_bytes_per_cached_token == 2 * per_layer


def test_the_verify_command_prints_the_report(tiny_llama_path):
    hitrate = str(Path(sys.executable).with_name("hitrate"))
    out = subprocess.run([hitrate, "engine", "verify", str(tiny_llama_path), "--json"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["max_logit_diff"] <= 1e-4 and 0 < report["qk_saved_fraction"] < 1
    text = subprocess.run([hitrate, "engine", "verify", str(tiny_llama_path)], capture_output=True, text=True,
                          timeout=300).stdout
    assert "cached vs recompute: max |logit diff|" in text and "K/V groups: 4 query heads over 2" in text
    assert report["fast_decode"] and report["fast_decode_check_diff"] <= 1e-4
    assert "decode steps: straight from the weights, checked at load" in text
    if cpu_linear.onednn_available(torch.float32):
        assert [entry["rows"] for entry in report["step_layouts"]] == list(range(1, 9))
        for entry in report["step_layouts"]:  # the chosen one is the fastest timed, or near it
            if not entry["noisy"]:  # (a busy machine's row counts keep the default layout)
                assert entry["step_ms"][entry["layout"]] <= decode_tuning.NEAR_FASTEST * min(entry["step_ms"].values())
            assert {"as stored", "oneDNN"} <= set(entry["step_ms"])
        assert "decode step layouts timed at load, the fastest chosen" in text
        assert "  4 rows " in text and "as stored" in text
        if shutil.which("cc"):  # the engine's own kernel is timed too
            assert all(decode_tuning.GEMV_KERNEL in entry["step_ms"] for entry in report["step_layouts"])
            assert report["gemv_kernel_off_reason"] is None and "GEMV kernel was not timed" not in text
        bare = subprocess.run([hitrate, "engine", "verify", str(tiny_llama_path)], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "CC": "no-such-cc"}).stdout
        assert "the engine's GEMV kernel was not timed: no C compiler (no-such-cc is not on PATH)" in bare
    if huge_pages.huge_pages_available():  # the tiny model's 512 x 64 embedding is 128 KiB
        assert report["huge_page_weight_bytes"] >= 512 * 64 * 4
        assert f"weights on huge pages: {report['huge_page_weight_bytes'] / 2**20:,.1f} MiB" in text
    missing = subprocess.run([hitrate, "engine", "verify", "/no/such/model"], capture_output=True, text=True,
                             timeout=300)
    assert missing.returncode == 2 and "error: could not load model" in missing.stderr


def test_verify_in_bfloat16_reports_the_difference_from_float32(tiny_llama_path):
    hitrate = str(Path(sys.executable).with_name("hitrate"))
    out = subprocess.run([hitrate, "engine", "verify", str(tiny_llama_path), "--dtype", "bfloat16", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["dtype"] == "bfloat16"
    assert 0 < report["float32_max_logit_diff"] <= 0.05 * report["float32_logit_span"]
    assert 0.5 <= report["float32_top_token_agreement"] <= 1
    text = subprocess.run([hitrate, "engine", "verify", str(tiny_llama_path), "--dtype", "bf16"], capture_output=True,
                          text=True, timeout=300).stdout
    assert "bfloat16 vs float32 on the prompt: max |logit diff|" in text
    plain = verify(TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096))
    assert plain.float32_max_logit_diff is None and "vs float32" not in "\n".join(plain.lines())


def test_verify_on_a_gguf_kept_quantized_compares_with_its_dequantized_weights(tiny_model_factory, tmp_path):
    from gguf_files import write_quantized_gguf

    folder = tiny_model_factory("qwen2", hidden=256, heads=4, kv_heads=2, intermediate=512)
    path = write_quantized_gguf(folder, tmp_path / "tiny-qwen2-q.gguf")
    hitrate = str(Path(sys.executable).with_name("hitrate"))
    out = subprocess.run([hitrate, "engine", "verify", str(path), "--json", "--pool-tokens", "512", "--max-batch", "2",
                          "--no-tune"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["weights"] == "gguf" and report["dtype"] == "float32"
    assert report["max_logit_diff"] <= 1e-4  # cached vs recompute, on the quantized path
    # the same weights dequantized: only the summation order differs
    assert 0 <= report["float32_max_logit_diff"] <= 1e-4 * report["float32_logit_span"]
    assert report["float32_top_token_agreement"] == 1.0
    assert 0 < report["weight_bytes"] < path.stat().st_size
    text = subprocess.run([hitrate, "engine", "verify", str(path), "--pool-tokens", "512", "--max-batch", "2",
                           "--no-tune"], capture_output=True, text=True, timeout=300).stdout
    assert "quantized as shipped (gguf)" in text
    assert "quantized kernels vs the same weights dequantized to float32 on the prompt: max |logit diff|" in text
