"""The engine's packed float32 kernel (`engine.native_gemv`): built with the machine's C compiler,
equal to `nn.Linear` at every row count and shape, cached, and absent with a reason where it
cannot be built."""

from __future__ import annotations

import platform
import shutil

import pytest
import torch
from torch import nn

from hitrate.engine import cpu_linear, native_gemv

needs_compiler = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on PATH")


@pytest.fixture
def fresh_kernel(tmp_path, monkeypatch):
    """A kernel cache of this test's own, and no kernel loaded before."""
    monkeypatch.setenv(native_gemv.ENV_CACHE, str(tmp_path / "kernels"))
    native_gemv._load.cache_clear()
    yield tmp_path / "kernels"
    native_gemv._load.cache_clear()


@needs_compiler
@pytest.mark.parametrize(("out_features", "in_features", "bias"),
                         [(1536, 640, False), (37, 29, True), (640, 2048, True), (5, 3, False), (16, 16, True)])
def test_products_equal_the_linear_for_every_row_count(out_features, in_features, bias):
    torch.manual_seed(out_features)
    linear = nn.Linear(in_features, out_features, bias=bias)
    products, nbytes = cpu_linear.packed_gemv_products([linear], 1 << 30)
    lanes = native_gemv.load().lanes
    assert len(products) == 1 and nbytes == -(-out_features // lanes) * lanes * in_features * 4
    with torch.inference_mode():
        for rows in range(0, 20):  # one row, the kernel's row groups, and groups with one row left
            x = torch.randn(rows, in_features)
            got = products[0](x)
            assert got.shape == (rows, out_features)
            if rows:
                want = linear(x)
                assert float((got - want).abs().max()) <= 1e-5 * max(float(want.abs().max()), 1.0), rows


@needs_compiler
@pytest.mark.parametrize(("out_features", "in_features", "bias"),
                         [(1536, 640, False), (640, 2048, True), (37, 29, True), (5, 3, False)])
def test_bfloat16_weights_stream_at_half_the_bytes_and_round_as_the_linear(out_features, in_features, bias):
    torch.manual_seed(2)
    linear = nn.Linear(in_features, out_features, bias=bias).to(torch.bfloat16)
    products, nbytes = cpu_linear.packed_gemv_products([linear], 1 << 30)
    kernel = native_gemv.load(torch.bfloat16)
    assert len(products) == 1 and products[0].packed.dtype == torch.bfloat16
    # Half float32's bytes; where the CPU has AVX512-BF16 the blocks hold input pairs (odd
    # inputs padded to a pair).
    assert nbytes == native_gemv.packed_nbytes(linear.weight, kernel)
    assert nbytes == -(-out_features // kernel.lanes) * kernel.lanes * -(-in_features // kernel.depth) * kernel.depth * 2
    with torch.inference_mode():
        for rows in (1, 2, 3, 5, 8, 9, 11):
            x = torch.randn(rows, in_features).to(torch.bfloat16)
            got, want = products[0](x), linear(x)
            assert got.dtype == torch.bfloat16
            # Both sum in float32 and round to bfloat16: a unit or two of its last place apart.
            exact = x.float() @ linear.weight.float().T + (0 if linear.bias is None else linear.bias.float())
            assert float((got.float() - exact).abs().max()) <= 2 ** -7 * float(exact.abs().max()), rows
            assert float((got.float() - want.float()).abs().max()) <= 2 ** -6 * float(want.float().abs().max()), rows


@needs_compiler
def test_tied_weights_share_one_copy_and_a_transposed_weight_packs_as_its_values():
    torch.manual_seed(1)
    embedding = nn.Embedding(300, 64)
    head = nn.Linear(64, 300, bias=False)
    with torch.no_grad():
        head.weight = nn.Parameter(embedding.weight.detach().t().contiguous().t(), requires_grad=False)  # `[in, out]`
    other = nn.Linear(64, 300, bias=False)
    other.weight = head.weight  # tied
    products, nbytes = cpu_linear.packed_gemv_products([head, other], 1 << 30)
    assert products[0].packed is products[1].packed
    assert nbytes == products[0].packed.numel() * 4
    x = torch.randn(3, 64)
    with torch.inference_mode():
        assert torch.allclose(products[1](x), x @ embedding.weight.T, atol=1e-5)


@needs_compiler
def test_the_budget_and_the_weights_decide_what_is_copied():
    linear = nn.Linear(32, 48)
    assert cpu_linear.packed_gemv_products([linear], 100) == ([], 0)  # over the budget
    assert cpu_linear.packed_gemv_products([nn.Linear(32, 48).half()], 1 << 30) == ([], 0)  # no float16 build
    mixed = [nn.Linear(32, 48), nn.Linear(32, 48).to(torch.bfloat16)]
    assert cpu_linear.packed_gemv_products(mixed, 1 << 30) == ([], 0)  # one dtype at a time
    product = cpu_linear.packed_gemv_products([nn.Linear(32, 48)], 1 << 30)[0][0]
    with pytest.raises(ValueError, match=r"float32 or bfloat16 \[rows, 32\]"):
        product(torch.randn(2, 31))


@needs_compiler
def test_the_built_library_is_reused_by_the_next_load(fresh_kernel, monkeypatch):
    assert native_gemv.load() is not None and native_gemv.unavailable_reason() is None
    built = list(fresh_kernel.glob("packed_gemv-*.so"))
    assert len(built) == 1 and not list(fresh_kernel.glob("*.partial"))
    native_gemv._load.cache_clear()
    monkeypatch.setattr(native_gemv, "_compile", lambda *args: pytest.fail("compiled again"))
    assert native_gemv.load() is not None


def test_without_a_compiler_there_is_no_kernel_and_the_reason_says_so(fresh_kernel, monkeypatch):
    monkeypatch.setenv(native_gemv.ENV_COMPILER, "no-such-compiler-here")
    assert native_gemv.load() is None
    assert native_gemv.unavailable_reason() == "no C compiler (no-such-compiler-here is not on PATH)"
    assert cpu_linear.packed_gemv_products([nn.Linear(8, 8)], 1 << 30) == ([], 0)


def test_a_compiler_that_fails_leaves_no_library_and_says_why(fresh_kernel, tmp_path, monkeypatch):
    failing = tmp_path / "failing-cc"
    failing.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo failing-cc 1.0; exit 0; }\n"
                       "echo 'error: unsupported option -fopenmp' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setenv(native_gemv.ENV_COMPILER, str(failing))
    assert native_gemv.load() is None
    assert native_gemv.unavailable_reason() == (
        f"{failing} could not build the kernel: error: unsupported option -fopenmp")
    assert not list(fresh_kernel.iterdir())  # neither a library nor a partial one


@needs_compiler
def test_a_cache_folder_that_cannot_be_written_means_no_kernel_and_says_where(fresh_kernel, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(native_gemv.ENV_CACHE, str(blocker / "kernels"))
    assert native_gemv.load() is None
    assert native_gemv.unavailable_reason().startswith(f"cannot write the kernel to {blocker / 'kernels'}")


@needs_compiler
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 instruction sets")
@pytest.mark.parametrize("march", ["x86-64-v3", "x86-64"])  # AVX2 (8 lanes, groups of 4 rows); SSE2 only
def test_the_kernel_built_for_a_machine_without_avx512_computes_the_same(tmp_path, march):
    flags = tuple(f"-march={march}" if flag == "-march=native" else flag for flag in native_gemv.FLAGS)
    library = tmp_path / f"gemv-{march}.so"
    native_gemv._compile(shutil.which("cc"), library, flags)
    kernel = native_gemv.open_library(library)
    assert (kernel.lanes, kernel.depth) == (8, 1)
    torch.manual_seed(3)
    for out_features, in_features in [(37, 29), (640, 1024), (8, 5)]:
        linear = nn.Linear(in_features, out_features)
        product = native_gemv.PackedProduct(kernel, native_gemv.pack(linear.weight, kernel), in_features,
                                            out_features, linear.bias)
        with torch.inference_mode():
            for rows in (1, 2, 3, 4, 5, 8, 9, 13):
                x = torch.randn(rows, in_features)
                want = linear(x)
                assert float((product(x) - want).abs().max()) <= 1e-5 * max(float(want.abs().max()), 1.0)
