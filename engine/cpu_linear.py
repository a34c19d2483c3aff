"""Prepacked oneDNN matmuls for decode on the CPU.

A decode step multiplies a handful of rows (one per running request) by every weight matrix, so
on a CPU it is bound by how fast the weights stream from memory. `nn.Linear` on CPU calls MKL's
sgemm on the weight as stored, which does well for one or two rows but, measured on this
project's machines (AVX-512, one thread), takes twice as long for 4 rows and three times for 8
on a large output head, although the bytes read are the same. oneDNN with its weight reordered
once ("prepacked", the layout PyTorch's own inductor uses for frozen CPU linears,
`torch.ops.mkldnn._reorder_linear_weight` / `_linear_pointwise`) keeps 4 and 8 rows close to the
cost of one, and in bfloat16 it uses AMX / AVX-512-BF16 where the CPU has them.

- `pack_large_linears`: float32 stays exact to float32 rounding. Only matrices of at least
  `min_bytes` are packed (oneDNN's per-call overhead outweighs the gain on small ones), and one
  or two rows keep MKL's path, which is faster there. The packed copy costs the matrix's bytes
  once more (a tied output head shares its storage with the embedding, which must stay).
- `pack_all_linears`: every linear of a bfloat16 model (transformers' bfloat16 `nn.Linear` on
  CPU reorders the weight at each call).
"""

from __future__ import annotations

import torch
from torch import nn

# Pack float32 matrices at least this large (a 32k x 384 head is 49 MB; a Gemma 3 270M MLP
# matrix 5 MB, which oneDNN does not speed up).
DEFAULT_MIN_PACK_BYTES = 16 << 20
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

    def __init__(self, linear: nn.Linear, min_rows: int) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.min_rows = min_rows
        with torch.no_grad():
            # Reordered for one row; oneDNN takes any number of rows with this layout.
            self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() < self.min_rows * self.in_features:
            return nn.functional.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def _linears(model: nn.Module):
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and child.weight.device.type == "cpu":
                yield parent, name, child


def pack_large_linears(model: nn.Module, min_bytes: int = DEFAULT_MIN_PACK_BYTES) -> int:
    """Float32: give every CPU linear of at least `min_bytes` a packed copy used from 3 rows on.
    Returns how many bytes the packed copies take."""
    if not onednn_available(torch.float32):
        return 0
    extra = 0
    for parent, name, linear in _linears(model):
        w = linear.weight
        if w.dtype != torch.float32 or w.numel() * w.element_size() < min_bytes:
            continue
        packed = PackedLinear(linear, min_rows=_MKL_MAX_ROWS + 1)
        setattr(parent, name, packed)
        extra += _nbytes(packed.packed)
    return extra


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

