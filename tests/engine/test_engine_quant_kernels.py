"""The quantized weight kernels (`engine.quant`): on GGUF blocks written by the `gguf` package
(random bytes with valid scale fields for the types it cannot quantize), each product equals the
package's reference dequantization followed by a float64 product, within a bound stated below.

The bound, the same for every type: each kernel forms a block's weights exactly as the reference
does (every d * scale * q product is exact in float32, so the weights agree bit for bit, which
`test_dequantize_gives_the_reference_weights_bit_for_bit` checks), so the products differ from
the float64 one only by float32 rounding of the `in` products and their sum. A sum of n terms in
any order is within gamma_n = n * u / (1 - n * u) of sum |w_i x_i| (u = 2^-24; Higham, Accuracy
and Stability, 4.2). The decode kernel sums each lane's in / LANES products in a chain, then the
LANES lanes: n = in / 8 + 16 covers both builds (8 or 16 lanes). The prefill tiles go through
torch's sgemm, whose order is not ours: n = in. One wrong weight among 768 moves a product by
about sum |w x| / 768, far above either bound."""

from __future__ import annotations

import platform
import shutil

import gguf
import numpy as np
import pytest
import torch

from hitrate.engine import native_gemv
from hitrate.engine.quant import QuantEmbedding, QuantLinear, UnsupportedQuantType, matrix, native, supported_types
from hitrate.engine.quant.formats import QuantType, block_size, dequantize_reference, row_nbytes

needs_compiler = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on PATH")
U = 2.0 ** -24
ALL_TYPES = sorted(supported_types())


def gamma(n: int) -> float:
    return n * U / (1 - n * U)


def _half_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).view(np.uint8).reshape(-1, 2 * values.shape[-1])


def write_blocks(qtype: QuantType, out_features: int, in_features: int, rng: np.random.Generator) -> np.ndarray:
    """GGUF rows uint8 `[out, row_bytes]` of `qtype`: `gguf.quants.quantize` of normal weights
    where the package quantizes the type; otherwise random bytes whose scales are set to small
    positive floats, so the weights are finite and of a size like real ones."""
    weights = rng.standard_normal((out_features, in_features)).astype(np.float32) * 0.05
    try:
        return np.ascontiguousarray(gguf.quants.quantize(weights, qtype)).view(np.uint8).reshape(out_features, -1)
    except NotImplementedError:
        pass
    rows = rng.integers(0, 256, (out_features, row_nbytes(qtype, in_features)), dtype=np.uint8)
    blocks = rows.reshape(-1, gguf.constants.GGML_QUANT_SIZES[qtype][1])
    n = blocks.shape[0]
    if qtype == QuantType.Q4_K:  # d, dmin first; the 6-bit scales and mins are any bytes
        blocks[:, 0:4] = _half_bytes(rng.uniform(1e-4, 2e-3, (n, 2)))
    elif qtype == QuantType.Q6_K:  # d last; the int8 scales are any bytes
        blocks[:, 208:210] = _half_bytes(rng.uniform(1e-4, 2e-3, (n, 1)))
    elif qtype == QuantType.Q8_K:  # f32 d first, then int8 q, then the int16 sums of q by 16
        blocks[:, 0:4] = rng.uniform(1e-4, 2e-3, (n, 1)).astype(np.float32).view(np.uint8)
        q = blocks[:, 4:260].view(np.int8).astype(np.int16).reshape(n, 16, 16)
        blocks[:, 260:292] = q.sum(axis=-1).astype(np.int16).view(np.uint8)
    else:
        raise AssertionError(f"no way to write {qtype.name} blocks")
    return rows


def reference_product(qtype: QuantType, rows: np.ndarray, x: np.ndarray, bias: np.ndarray | None = None):
    """The float64 product with the reference weights and the sum |w x| that bounds the error."""
    w = dequantize_reference(qtype, rows).astype(np.float64)
    x64 = x.astype(np.float64)
    want = x64 @ w.T + (0.0 if bias is None else bias.astype(np.float64))
    scale = np.abs(x64) @ np.abs(w).T + (0.0 if bias is None else np.abs(bias.astype(np.float64)))
    return want, scale


def assert_within(got: torch.Tensor, want: np.ndarray, scale: np.ndarray, n: int) -> None:
    error = np.abs(got.double().numpy() - want)
    bound = gamma(n) * scale + 1e-30
    worst = np.unravel_index(np.argmax(error / bound), error.shape)
    assert (error <= bound).all(), f"error {error[worst]:.3g} > bound {bound[worst]:.3g} at {worst}"


def test_every_required_type_is_supported():
    assert set(ALL_TYPES) == {QuantType.Q4_K, QuantType.Q5_0, QuantType.Q6_K, QuantType.Q8_0, QuantType.F32,
                              QuantType.Q4_0, QuantType.Q8_K, QuantType.F16, QuantType.BF16}


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_dequantize_gives_the_reference_weights_bit_for_bit(qtype):
    rng = np.random.default_rng(int(qtype))
    rows = write_blocks(qtype, 19, 512, rng)
    linear = QuantLinear(qtype, torch.from_numpy(rows), 19, 512)
    got = linear.dequantize()
    assert got.dtype == torch.float32 and got.shape == (19, 512)
    assert np.array_equal(got.numpy(), dequantize_reference(qtype, rows))


@needs_compiler
@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_products_equal_the_reference_within_the_summation_bound(qtype):
    rng = np.random.default_rng(100 + int(qtype))
    out_features, in_features = 37, 768  # out not a multiple of 16; in 3 K-blocks, 24 small ones
    rows = write_blocks(qtype, out_features, in_features, rng)
    linear = QuantLinear(qtype, torch.from_numpy(rows), out_features, in_features)
    assert linear.matrix._kernel is not None
    for count in [*range(1, 10), 37]:
        x = rng.standard_normal((count, in_features)).astype(np.float32)
        with torch.inference_mode():
            got = linear(torch.from_numpy(x))
        assert got.dtype == torch.float32 and got.shape == (count, out_features)
        want, scale = reference_product(qtype, rows, x)
        decode = count <= matrix.DECODE_ROWS
        assert_within(got, want, scale, in_features // 8 + 16 if decode else in_features)


@needs_compiler
def test_bias_is_added_on_the_decode_and_the_prefill_path():
    rng = np.random.default_rng(7)
    rows = write_blocks(QuantType.Q5_0, 21, 256, rng)
    bias = rng.standard_normal(21).astype(np.float32)
    linear = QuantLinear(QuantType.Q5_0, torch.from_numpy(rows), 21, 256, bias=torch.from_numpy(bias))
    for count in (1, 8, 12):
        x = rng.standard_normal((count, 256)).astype(np.float32)
        want, scale = reference_product(QuantType.Q5_0, rows, x, bias)
        assert_within(linear(torch.from_numpy(x)), want, scale, 256 + 1)


def test_bfloat16_input_gives_bfloat16_and_leading_dimensions_are_kept():
    rng = np.random.default_rng(8)
    rows = write_blocks(QuantType.Q8_0, 33, 128, rng)
    linear = QuantLinear(QuantType.Q8_0, torch.from_numpy(rows), 33, 128)
    x = torch.from_numpy(rng.standard_normal((2, 3, 128)).astype(np.float32)).to(torch.bfloat16)
    got = linear(x)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 3, 33)
    want, scale = reference_product(QuantType.Q8_0, rows, x.float().reshape(6, 128).numpy())
    # bfloat16 inputs widen exactly; the answer is rounded once more to bfloat16 (2^-8 relative).
    error = np.abs(got.reshape(6, 33).double().numpy() - want)
    assert (error <= gamma(128) * scale + 2.0 ** -8 * np.abs(want)).all()


def test_the_blocks_are_used_in_place_and_a_tied_head_shares_them():
    rng = np.random.default_rng(9)
    rows = torch.from_numpy(write_blocks(QuantType.Q6_K, 50, 256, rng))
    embedding = QuantEmbedding(QuantType.Q6_K, rows, 50, 256)
    head = QuantLinear(QuantType.Q6_K, embedding.blocks, 50, 256)
    assert embedding.blocks.data_ptr() == head.blocks.data_ptr() == rows.data_ptr()
    assert head.weight_nbytes == embedding.weight_nbytes == rows.numel() == 50 * 210
    assert not hasattr(head, "weight")


def test_embedding_dequantizes_only_the_looked_up_rows():
    rng = np.random.default_rng(10)
    rows = write_blocks(QuantType.Q4_K, 77, 512, rng)
    embedding = QuantEmbedding(QuantType.Q4_K, torch.from_numpy(rows), 77, 512)
    ids = torch.tensor([[3, 76, 3], [0, 41, 12]])
    got = embedding(ids)
    assert got.shape == (2, 3, 512) and got.dtype == torch.float32
    want = dequantize_reference(QuantType.Q4_K, rows[ids.reshape(-1).numpy()]).reshape(2, 3, 512)
    assert np.array_equal(got.numpy(), want)
    with pytest.raises(IndexError, match=r"\[0, 77\)"):
        embedding(torch.tensor([77]))
    with pytest.raises(ValueError, match="integers"):
        embedding(torch.tensor([1.0]))


def test_an_unsupported_type_is_named():
    for qtype in (QuantType.Q2_K, QuantType.IQ4_XS, 9999):
        with pytest.raises(UnsupportedQuantType, match="Q2_K|IQ4_XS|9999") as caught:
            QuantLinear(qtype, torch.zeros(4, 84, dtype=torch.uint8), 4, 256)
        assert "Q4_K" in str(caught.value)  # and says which ones are


def test_blocks_of_the_wrong_shape_or_rows_of_partial_blocks_are_refused():
    with pytest.raises(ValueError, match=r"uint8 blocks \[4, 144\]"):
        QuantLinear(QuantType.Q4_K, torch.zeros(4, 140, dtype=torch.uint8), 4, 256)
    with pytest.raises(ValueError, match="blocks of 256"):
        QuantLinear(QuantType.Q4_K, torch.zeros(4, 144, dtype=torch.uint8), 4, 250)
    linear = QuantLinear(QuantType.Q8_0, torch.from_numpy(write_blocks(QuantType.Q8_0, 4, 64, np.random.default_rng(1))), 4, 64)
    with pytest.raises(ValueError, match=r"\[\.\.\., 64\]"):
        linear(torch.zeros(2, 32))


@pytest.mark.parametrize("qtype", [QuantType.Q4_K, QuantType.F32], ids=lambda t: t.name)
def test_without_the_kernels_the_reference_path_gives_the_same_products(qtype, monkeypatch):
    rng = np.random.default_rng(11)
    in_features = 256 if qtype == QuantType.Q4_K else 50  # 50: float rows the kernels do not take
    rows = write_blocks(qtype, 29, in_features, rng)
    monkeypatch.setattr(native, "load", lambda: None)
    linear = QuantLinear(qtype, torch.from_numpy(rows), 29, in_features)
    assert linear.matrix._kernel is None
    for count in (1, 5, 20):
        x = rng.standard_normal((count, in_features)).astype(np.float32)
        want, scale = reference_product(qtype, rows, x)
        assert_within(linear(torch.from_numpy(x)), want, scale, in_features)
    assert np.array_equal(QuantEmbedding(qtype, torch.from_numpy(rows), 29, in_features)(torch.tensor([4, 2])).numpy(),
                          dequantize_reference(qtype, rows[[4, 2]]))


@needs_compiler
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 instruction sets")
@pytest.mark.parametrize("march", ["x86-64", "x86-64-v3"])  # SSE2 only (no integer path); AVX2 without AVX-512
def test_the_builds_for_machines_without_avx512_compute_the_same(tmp_path, monkeypatch, march):
    flags = tuple(f"-march={march}" if flag == "-march=native" else flag for flag in native.FLAGS)
    library = tmp_path / f"quant-{march}.so"
    native_gemv._compile(shutil.which("cc"), library, flags, native.SOURCE)
    kernels = native.open_library(library)
    assert kernels.supports_int8(QuantType.Q5_0) == (march == "x86-64-v3")
    monkeypatch.setattr(native, "load", lambda: kernels)
    rng = np.random.default_rng(12)
    for qtype in ALL_TYPES:
        rows = write_blocks(qtype, 23, 512, rng)
        linear = QuantLinear(qtype, torch.from_numpy(rows), 23, 512)
        assert linear.matrix._kernel is kernels
        assert np.array_equal(linear.dequantize().numpy(), dequantize_reference(qtype, rows))
        int8 = QuantLinear(qtype, torch.from_numpy(rows), 23, 512, activations="int8")
        for count in (1, 4, 9):
            x = rng.standard_normal((count, 512)).astype(np.float32)
            want, scale = reference_product(qtype, rows, x)
            assert_within(linear(torch.from_numpy(x)), want, scale, 512 // 8 + 16 if count <= 8 else 512)
            if int8.matrix.int8_activations and count <= 8:
                assert (np.abs(int8(torch.from_numpy(x)).double().numpy() - want) <= int8_bound(qtype, rows, x)).all()


def test_block_sizes_come_from_the_gguf_table():
    assert block_size(QuantType.Q4_K) == 256 and row_nbytes(QuantType.Q4_K, 1536) == 6 * 144
    assert block_size(QuantType.Q5_0) == 32 and row_nbytes(QuantType.Q5_0, 896) == 28 * 22


def int8_bound(qtype: QuantType, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
    """What quantizing the activations may cost: each x_i moves by at most half its block's step
    (max |x| over the block / 127; blocks of 256 for the K types, 32 otherwise), so the product by
    at most sum |w_i| * step_i / 2; plus float32 rounding, far below that (1e-5 of sum |w| (|x| + step))."""
    w = np.abs(dequantize_reference(qtype, rows).astype(np.float64))
    block = 256 if qtype in (QuantType.Q4_K, QuantType.Q6_K) else 32
    step = np.abs(x.astype(np.float64)).reshape(x.shape[0], -1, block).max(axis=-1) / 127
    step = np.repeat(step, block, axis=-1)
    return (step / 2 * (1 + 2.0 ** -20)) @ w.T + 1e-5 * ((np.abs(x) + step) @ w.T)


@needs_compiler
@pytest.mark.parametrize("qtype", [QuantType.Q4_0, QuantType.Q5_0, QuantType.Q8_0, QuantType.Q4_K, QuantType.Q6_K],
                         ids=lambda t: t.name)
def test_int8_activations_stay_within_the_activation_rounding_bound(qtype):
    rng = np.random.default_rng(200 + int(qtype))
    out_features, in_features = 37, 768
    rows = write_blocks(qtype, out_features, in_features, rng)
    linear = QuantLinear(qtype, torch.from_numpy(rows), out_features, in_features, activations="int8")
    exact = QuantLinear(qtype, torch.from_numpy(rows), out_features, in_features)
    assert linear.matrix.int8_activations and not exact.matrix.int8_activations
    for count in range(1, 10):
        x = rng.standard_normal((count, in_features)).astype(np.float32)
        x[:, :5] *= 40  # a few large activations: their blocks' steps grow, the bound with them
        got = linear(torch.from_numpy(x)).double().numpy()
        want, scale = reference_product(qtype, rows, x)
        bound = int8_bound(qtype, rows, x) if count <= matrix.DECODE_ROWS else gamma(in_features) * scale
        assert (np.abs(got - want) <= bound).all()
        if count <= matrix.DECODE_ROWS:  # it really is the 8-bit path: not the exact product
            assert np.abs(got - want).max() > 100 * gamma(in_features // 8 + 16) * scale.max()


def test_int8_activations_are_refused_by_name_when_misspelled():
    with pytest.raises(ValueError, match="float32, int8"):
        QuantLinear(QuantType.Q8_0, torch.zeros(2, 34, dtype=torch.uint8), 2, 32, activations="int4")
