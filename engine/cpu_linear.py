"""Weight layouts for the matrix products of decode on the CPU.

A decode step multiplies a handful of rows (one per running request) by every weight matrix, so
on a CPU it is bound by how fast the weights stream from memory, and by how well the BLAS kernel
for that layout and row count keeps up with it. `nn.Linear` on CPU calls MKL's sgemm on the
weight as stored, which does well for one row but, on the matrices of a decode step, takes two
to three times as long for 4 or 8 rows on the machines measured, although the bytes read are the
same. Which other layout does better depends on the CPU, so the engine times them at load
(`engine.decode_tuning`); this module builds them, each checked against its linear on a probe:

- `packed_gemv_products`: copies in the layout of the engine's own kernel
  (`engine.native_gemv`, built at load with the machine's C compiler), one copy for every row
  count; fastest at every row count from 1 to 8 on an AMD EPYC (Zen 4) machine.
- `onednn_products`: copies in oneDNN's reordered layout ("prepacked", the layout PyTorch's
  own inductor uses for frozen CPU linears, `torch.ops.mkldnn._reorder_linear_weight` /
  `_linear_pointwise`), one copy for every row count; fastest at every row count on an AMD
  EPYC (Zen 4) machine.
- `row_major_products`: copies in the natural `[out, in]` layout; fastest at 2 and 3 rows on
  an Intel AVX-512 machine, where MKL picks a better kernel for that layout.
- `pack_for_batch_sizes`: copies in MKL's packed-GEMM layout (`cblas_sgemm_pack`, the path
  inductor takes for frozen float32 linears), one per row count, each computing steps of
  exactly that many rows; fastest from 4 rows on that Intel machine.
- `store_transposed`: a float32 linear's weight kept as `[in, out]` in memory (the `[out, in]`
  parameter a transposed view of it), so `F.linear` hands MKL a plain `x @ W` instead of
  `x @ W^T`. Measured on two cores: 1 row 8% faster on Gemma 3 270M's 262k x 640 head (23.0 vs
  25.0 ms), and 4 rows of a 384 x 1152 matrix 14 us instead of 46 us, where MKL's transposed
  path switches kernels. Same values; the tests' models give bit-identical logits.
- `pack_large_linears`: float32 matrices of at least `min_bytes` (a large output head) get a
  oneDNN copy used by the model's own forward from 3 rows on; `pack_all_linears`: every linear
  of a bfloat16 model (transformers' bfloat16 `nn.Linear` on CPU reorders the weight at each
  call; oneDNN uses AMX / AVX-512-BF16 where the CPU has them).

Float32 copies stay exact to float32 rounding (another summation order); each costs the
weights' bytes once more (a tied output head shares its storage with the embedding, which must
stay).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from hitrate.engine import huge_pages, native_gemv

# Pack float32 matrices at least this large. With weights stored `[in, out]`, MKL beats the packed
# copy at every row count on a 32k x 384 head (49 MB: 1.2 vs 1.6 ms at 4 rows, 1.4 vs 2.0 at 8,
# two cores), and loses from 3 rows on for Gemma 3 270M's 262k x 640 head (671 MB: 43 vs 36 ms at
# 4 rows, 57 vs 44 at 8): packing pays for matrices that stream from memory each step.
DEFAULT_MIN_PACK_BYTES = 256 << 20
# Weight copies for decode steps (`engine.decode_tuning`): at most this many bytes while the
# layouts are timed; those no row count chose are freed after.
DEFAULT_BATCH_PACK_BYTES = 2 << 30
# Packed products may round differently from the plain ones (another summation order); anything
# past float32 rounding means the copy is wrong.
_PACKED_TOLERANCE = 1e-5
# The same for bfloat16 products: a few units in the last place of bfloat16 (2^-8 relative).
_BF16_TOLERANCE = 2e-2
# Up to this many rows MKL's path is as fast as or faster than the packed one.
_MKL_MAX_ROWS = 2


def onednn_available(dtype: torch.dtype) -> bool:
    """Whether this torch build can run prepacked oneDNN linears in `dtype` on the CPU."""
    if not torch.backends.mkldnn.is_available():
        return False
    ops = torch.ops.mkldnn
    if not (hasattr(ops, "_reorder_linear_weight") and hasattr(ops, "_linear_pointwise")):
        return False
    if dtype == torch.bfloat16:
        return bool(ops._is_mkldnn_bf16_supported())
    return dtype == torch.float32


class PackedLinear(nn.Linear):
    """An `nn.Linear` that keeps its parameters (tied weights stay tied) and also holds the
    weight in oneDNN's packed layout, used from `min_rows` input rows on."""

    def __init__(self, linear: nn.Linear, min_rows: int, batch_hint: int = 1) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.min_rows = min_rows
        self.batch_hint = batch_hint
        with torch.no_grad():
            # Reordered for `batch_hint` rows; oneDNN takes any number of rows with this layout,
            # but how fast depends on the hint (`onednn_products`).
            self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach().contiguous(), batch_hint)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() < self.min_rows * self.in_features:
            return nn.functional.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def mkl_packed_available() -> bool:
    """Whether this torch build has MKL's packed float32 GEMM (`torch.ops.mkl._mkl_linear`)."""
    ops = getattr(torch.ops, "mkl", None)
    return bool(torch.backends.mkl.is_available()) and all(
        hasattr(ops, name) for name in ("_mkl_reorder_linear_weight", "_mkl_linear"))


Product = Callable[[torch.Tensor], torch.Tensor]


def _packed_products(linear: nn.Module, sizes: list[int]) -> dict[int, Product]:
    """{rows: `x -> linear(x)` for `x` of exactly `rows` rows, on an MKL-packed copy of the weight}."""
    weight, bias = linear.weight, linear.bias
    mkl_linear = torch.ops.mkl._mkl_linear
    with torch.no_grad():
        dense = weight.detach().contiguous()  # `[out, in]`, what the reorder takes (one copy for every size)
        packs = {rows: torch.ops.mkl._mkl_reorder_linear_weight(dense, rows) for rows in sizes}

    def product(packed: torch.Tensor, rows: int) -> Product:
        def run(x: torch.Tensor) -> torch.Tensor:  # a plain closure: called ~35 times a step
            return mkl_linear(x, packed, weight, bias, rows)
        return run

    return {rows: product(packed, rows) for rows, packed in packs.items()}


def _relative_diff(product: Product, linear: nn.Module, rows: int, generator: torch.Generator) -> float:
    x = torch.randn(rows, linear.weight.shape[1], generator=generator).to(linear.weight.dtype)
    plain = linear(x).float()
    return float((product(x).float() - plain).abs().max()) / max(float(plain.abs().max()), 1e-30)


def _cpu_matrices_dtype(linears: list[nn.Module]) -> torch.dtype | None:
    """The dtype of the linears' weights when every one is a 2-D CPU tensor of that one dtype."""
    weights = [lin.weight for lin in linears]
    dtypes = {w.dtype for w in weights}
    if len(dtypes) != 1 or not all(w.device.type == "cpu" and w.dim() == 2 for w in weights):
        return None
    return dtypes.pop()


def _float32_cpu_matrices(linears: list[nn.Module]) -> bool:
    """Whether every linear's weight is a 2-D float32 CPU tensor: the only weights the BLAS
    copies of this module are built for."""
    return _cpu_matrices_dtype(linears) == torch.float32


def _agree(products: list[Product], linears: list[nn.Module], rows: list[int] | tuple[int, ...],
           tolerance: float = _PACKED_TOLERANCE) -> bool:
    """Whether each product gives its linear's output to rounding (float32's by default: another
    summation order) on a probe of each of `rows` rows: a copy that does not is wrong, and none
    is used."""
    probe = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        return max(_relative_diff(found, lin, n, probe)
                   for found, lin in zip(products, linears) for n in rows) <= tolerance


def pack_for_batch_sizes(linears: list[nn.Module], sizes: list[int], budget_bytes: int) -> tuple[dict[int, list[Product]], int]:
    """Products of `linears` on packed copies for as many of `sizes` (in order of preference) as
    `budget_bytes` allows, each size costing the weights' bytes once more: {rows: one product per
    linear}, and their bytes. Float32 CPU weights only, else nothing; each copy is checked
    against the plain linear on a probe, and none is used if one disagrees."""
    if not mkl_packed_available() or not _float32_cpu_matrices(linears):
        return {}, 0
    per_size = sum(_nbytes(w) for w in {id(lin.weight): lin.weight for lin in linears}.values())
    chosen = list(dict.fromkeys(n for n in sizes if n >= 2))[: max(0, budget_bytes // max(per_size, 1))]
    if not chosen:
        return {}, 0
    with torch.inference_mode():
        per_linear = [_packed_products(lin, chosen) for lin in linears]
    products = {rows: [found[rows] for found in per_linear] for rows in chosen}
    # Each size's copy is checked at its own row count only: MKL computes it for no other.
    if not all(_agree(found, linears, [rows]) for rows, found in products.items()):
        return {}, 0
    return products, per_size * len(products)


def onednn_products(linears: list[nn.Module], batch_hint: int, budget_bytes: int) -> tuple[list[Product], int]:
    """Float32 products of `linears` on oneDNN copies of their weights reordered for
    `batch_hint` rows, one copy serving every row count (tied weights share one); a
    `PackedLinear` reordered for the same hint runs on its own copy. The hint decides the
    speed: on one AMD EPYC (Zen 4) machine, two cores, a 32000 x 384 head took 4.2 ms for 4
    rows reordered for 1 row and 1.8 ms reordered for 4 or 8 (MKL on the weight as stored:
    6.7 ms; one row 2.1 ms). Returns one product per linear and the bytes of the new copies;
    none when they exceed `budget_bytes`, the build has no oneDNN, or a product disagrees with
    its linear on a probe."""
    if not onednn_available(torch.float32) or not all(isinstance(lin, nn.Linear) for lin in linears) \
            or not _float32_cpu_matrices(linears):
        return [], 0
    own = {id(lin.weight): lin for lin in linears if isinstance(lin, PackedLinear) and lin.batch_hint == batch_hint}
    fresh = {id(lin.weight): lin.weight for lin in linears if id(lin.weight) not in own}
    size = sum(_nbytes(w) for w in fresh.values())
    if size > budget_bytes:
        return [], 0
    pointwise = torch.ops.mkldnn._linear_pointwise
    with torch.no_grad():
        packs = {key: torch.ops.mkldnn._reorder_linear_weight(w.detach().contiguous(), batch_hint)
                 for key, w in fresh.items()}
    packs.update({key: lin.packed for key, lin in own.items()})

    def product(packed: torch.Tensor, bias: torch.Tensor | None) -> Product:
        return lambda x: pointwise(x, packed, bias, "none", [], "")

    products = [product(packs[id(lin.weight)], lin.bias) for lin in linears]
    if not _agree(products, linears, sorted({1, 2, batch_hint})):
        return [], 0
    return products, size


def packed_gemv_products(linears: list[nn.Module], budget_bytes: int) -> tuple[list[Product], int]:
    """Products of `linears` (float32, or bfloat16, all alike) on copies in `engine.native_gemv`'s
    packed layout, one copy serving every row count (tied weights share one). Returns one product
    per linear and the bytes of the copies; none when they exceed `budget_bytes`, the kernel
    cannot be built here (`native_gemv.unavailable_reason`), or a product disagrees with its
    linear on a probe. The copies go on huge pages (`engine.huge_pages`)."""
    if not all(isinstance(lin, nn.Linear) for lin in linears):
        return [], 0
    dtype = _cpu_matrices_dtype(linears)
    kernel = native_gemv.load(dtype) if dtype in native_gemv.WEIGHT_DTYPES else None
    if kernel is None:
        return [], 0
    unique = {id(lin.weight): lin.weight for lin in linears}
    size = sum(native_gemv.packed_nbytes(w, kernel) for w in unique.values())
    if size > budget_bytes:
        return [], 0
    packs = {key: native_gemv.pack(w, kernel) for key, w in unique.items()}
    huge_pages.move_to_huge_pages(packs.values())
    products = [native_gemv.PackedProduct(kernel, packs[id(lin.weight)], lin.in_features, lin.out_features, lin.bias)
                for lin in linears]
    # bfloat16: both round their float32 sums to bfloat16 (2^-8 relative), from other orders.
    if not _agree(products, linears, (1, 2, 3, 8, 9), _BF16_TOLERANCE if dtype == torch.bfloat16 else _PACKED_TOLERANCE):
        return [], 0
    return products, size


def weight_product(weight: torch.Tensor, bias: torch.Tensor | None) -> Product:
    """`x -> F.linear(x, weight, bias)` for a 2-D `x` as the `mm` / `addmm` that `F.linear` itself
    runs on `weight` as laid out in memory (the same product, bit for bit), without the call chain:
    a decode step runs ~75 of them, where that chain costs more than the op on a small matrix."""
    weight_t = weight.t()
    if bias is None:
        return lambda x: torch.mm(x, weight_t)
    return lambda x: torch.addmm(bias, x, weight_t)


def row_major_products(linears: list[nn.Module], budget_bytes: int) -> tuple[list[Product], int]:
    """Products of `linears` on row-major copies of their weights (`[out, in]` contiguous, the
    layout `store_transposed` turned away from), where MKL may take a faster kernel than on
    `[in, out]` or on its packed copies. Measured on an Intel AVX-512 machine, two cores, the
    weights on huge pages, the products of a step in ms ([in, out] / [out, in] / MKL-packed):
    Gemma 3 270M's layers at 2 rows 23.7 / 18.4 / 21.5 and its head 40.0 / 24.9 / 30.1; at 3
    rows 29.1 / 18.6 / 25.8 and 41.0 / 27.3 / 33.3. At 1 row `[in, out]` stays faster (Gemma 3's
    head 22.5 / 25.0), from 4 rows the packed copies; on an AMD EPYC machine row-major was the
    slowest at 2 and 3 rows. Returns one product per linear and the bytes of the copies; none
    when the copies exceed `budget_bytes` or one disagrees with its linear on a probe. The copies
    go on huge pages (`engine.huge_pages`). None either when every weight is row-major already."""
    if not all(isinstance(lin, nn.Linear) for lin in linears) or not _float32_cpu_matrices(linears):
        return [], 0
    unique = {id(lin.weight): lin.weight for lin in linears}
    size = sum(_nbytes(w) for w in unique.values() if not w.is_contiguous())
    if not 0 < size <= budget_bytes:  # nothing to copy: the weights are row-major already
        return [], 0
    with torch.no_grad():
        copies = {key: w.detach().contiguous() for key, w in unique.items()}
    huge_pages.move_to_huge_pages([c for key, c in copies.items() if c is not unique[key]])
    products = [weight_product(copies[id(lin.weight)], lin.bias) for lin in linears]
    if not _agree(products, linears, (2, 3)):
        return [], 0
    return products, size


def _linears(model: nn.Module):
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and child.weight.device.type == "cpu":
                yield parent, name, child


def pack_large_linears(model: nn.Module, min_bytes: int = DEFAULT_MIN_PACK_BYTES, batch_hint: int = 1) -> int:
    """Float32: give every CPU linear of at least `min_bytes` a packed copy, reordered for
    `batch_hint` rows, used from 3 rows on. Returns how many bytes the packed copies take."""
    if not onednn_available(torch.float32):
        return 0
    extra = 0
    for parent, name, linear in _linears(model):
        w = linear.weight
        if w.dtype != torch.float32 or w.numel() * w.element_size() < min_bytes:
            continue
        packed = PackedLinear(linear, min_rows=_MKL_MAX_ROWS + 1, batch_hint=batch_hint)
        setattr(parent, name, packed)
        extra += _nbytes(packed.packed)
    return extra


def unpack_large_linears(model: nn.Module) -> int:
    """Undo `pack_large_linears`: each `PackedLinear` becomes a plain `nn.Linear` on the same
    parameters, for when decode steps run on copies of their own and the packed copy would only
    serve prompts whose every position's logits are kept. Returns the bytes let go."""
    freed = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, PackedLinear) and child.min_rows > 1:
                plain = nn.Linear(child.in_features, child.out_features, bias=child.bias is not None, device="meta")
                plain.weight, plain.bias = child.weight, child.bias
                setattr(parent, name, plain)
                freed += _nbytes(child.packed)
    return freed


def store_transposed(model: nn.Module) -> int:
    """Float32 CPU linears: keep each weight as `[in, out]` (see the module docstring). A weight
    shared with another module (a tied embedding) is replaced there too, so it stays shared:
    an embedding gathers its rows from the transposed view just the same. Returns how many
    weights were re-laid."""
    done: dict[int, nn.Parameter] = {}
    for _parent, _name, linear in _linears(model):
        w = linear.weight
        if w.dtype != torch.float32 or id(w) in done or w.dim() != 2 or not w.is_contiguous():
            continue
        with torch.no_grad():
            done[id(w)] = nn.Parameter(w.detach().t().contiguous().t(), requires_grad=w.requires_grad)
    if not done:
        return 0
    for module in model.modules():
        for key, param in list(module._parameters.items()):
            if param is not None and id(param) in done:
                module._parameters[key] = done[id(param)]
    return len(done)


def pack_all_linears(model: nn.Module) -> int:
    """Bfloat16: every CPU linear runs on its packed weight. Returns how many bytes the packed
    copies take."""
    if not onednn_available(torch.bfloat16):
        return 0
    extra = 0
    for parent, name, linear in _linears(model):
        if linear.weight.dtype == torch.bfloat16:
            packed = PackedLinear(linear, min_rows=1)
            setattr(parent, name, packed)
            extra += _nbytes(packed.packed)
    return extra


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()

