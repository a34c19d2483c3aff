"""The quantized kernels on rows of the real Qwen2.5-Coder GGUF files, captured into
tests/fixtures/gguf_rows/ (a few KB: the stored bytes of a few rows of one tensor of each type the
files use, with its type, width and origin), so the test runs without the files.

Recapture (reads the files with gguf.GGUFReader, writes the fixtures):
    .venv/bin/python tests/engine/test_engine_quant_gguf_rows.py /work/models
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hitrate.engine.quant import QuantEmbedding, QuantLinear
from hitrate.engine.quant.formats import QuantType, dequantize_reference

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gguf_rows"
U = 2.0 ** -24

# (file, tensor, rows): one tensor of each quantized type in the two files.
CAPTURES = [
    ("qwen2.5-coder-0.5b-instruct.gguf", "blk.0.attn_q.weight", (0, 1, 895)),  # Q5_0
    ("qwen2.5-coder-0.5b-instruct.gguf", "output.weight", (0, 9707, 151935)),  # Q8_0
    ("qwen2.5-coder-0.5b-instruct.gguf", "blk.11.ffn_down.weight", (7,)),  # Q4_K
    ("qwen2.5-coder-0.5b-instruct.gguf", "blk.0.ffn_down.weight", (3,)),  # Q6_K
    ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "blk.0.attn_q.weight", (0, 700, 1535)),  # Q4_K
    ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "output.weight", (0, 9707, 151935)),  # Q6_K
    ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "blk.0.attn_q.bias", None),  # F32, whole
]


def fixture_name(file: str, tensor: str) -> str:
    return f"{file.removesuffix('.gguf')}--{tensor}.npz"


def capture(models: Path) -> None:
    import gguf

    for file, tensor_name, rows in CAPTURES:
        tensor = next(t for t in gguf.GGUFReader(models / file).tensors if t.name == tensor_name)
        data = np.asarray(tensor.data).view(np.uint8).reshape(int(np.prod(tensor.shape[1:])), -1)
        ids = np.arange(data.shape[0]) if rows is None else np.array(rows)
        np.savez_compressed(FIXTURES / fixture_name(file, tensor_name), rows=data[ids], row_ids=ids,
                            qtype=int(tensor.tensor_type), in_features=int(tensor.shape[0]),
                            out_features=int(np.prod(tensor.shape[1:])), source=f"{file}:{tensor_name}")


def load(file: str, tensor: str) -> dict:
    with np.load(FIXTURES / fixture_name(file, tensor)) as saved:
        return {key: saved[key] for key in saved.files}


def test_the_fixtures_hold_every_type_of_both_files():
    types = {QuantType(int(load(file, tensor)["qtype"])) for file, tensor, _ in CAPTURES}
    assert types == {QuantType.Q5_0, QuantType.Q8_0, QuantType.Q4_K, QuantType.Q6_K, QuantType.F32}
    assert sum(path.stat().st_size for path in FIXTURES.glob("*.npz")) < 32_000


@pytest.mark.parametrize(("file", "tensor"), [(f, t) for f, t, rows in CAPTURES if rows is not None])
def test_real_rows_multiply_as_the_reference_says(file, tensor):
    saved = load(file, tensor)
    qtype, in_features = QuantType(int(saved["qtype"])), int(saved["in_features"])
    rows = saved["rows"]
    weights = dequantize_reference(qtype, rows)
    # Real weights: finite, small, not all equal (the bytes are a tensor's, not padding).
    assert np.isfinite(weights).all() and 1e-4 < weights.std() < 1.0
    linear = QuantLinear(qtype, torch.from_numpy(rows), rows.shape[0], in_features)
    assert np.array_equal(linear.dequantize().numpy(), weights)
    rng = np.random.default_rng(5)
    for count in (1, 3, 8, 11):
        x = rng.standard_normal((count, in_features)).astype(np.float32)
        want = x.astype(np.float64) @ weights.astype(np.float64).T
        scale = np.abs(x.astype(np.float64)) @ np.abs(weights.astype(np.float64)).T
        got = linear(torch.from_numpy(x)).double().numpy()
        n = in_features // 8 + 16 if count <= 8 else in_features  # see test_engine_quant_kernels
        assert (np.abs(got - want) <= n * U / (1 - n * U) * scale).all()
    embedding = QuantEmbedding(qtype, torch.from_numpy(rows), rows.shape[0], in_features)
    assert np.array_equal(embedding(torch.tensor([rows.shape[0] - 1, 0])).numpy(), weights[[-1, 0]])


def test_a_real_bias_is_added_to_real_rows():
    weight, bias = load(CAPTURES[4][0], "blk.0.attn_q.weight"), load(CAPTURES[4][0], "blk.0.attn_q.bias")
    assert QuantType(int(bias["qtype"])) == QuantType.F32 and bias["rows"].shape == (1, 1536 * 4)
    bias_values = bias["rows"].reshape(-1).view(np.float32)[weight["row_ids"]]
    linear = QuantLinear(QuantType.Q4_K, torch.from_numpy(weight["rows"]), 3, 1536, bias=torch.from_numpy(bias_values))
    x = np.random.default_rng(6).standard_normal((2, 1536)).astype(np.float32)
    weights = dequantize_reference(QuantType.Q4_K, weight["rows"]).astype(np.float64)
    want = x @ weights.T + bias_values
    scale = np.abs(x) @ np.abs(weights).T + np.abs(bias_values)
    n = 1536 // 8 + 17
    assert (np.abs(linear(torch.from_numpy(x)).double().numpy() - want) <= n * U * 1.001 * scale).all()


if __name__ == "__main__":
    capture(Path(sys.argv[1]))
