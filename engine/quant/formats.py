"""The GGUF block formats the engine multiplies in place, and their reference dequantization.

A GGUF weight row of `in_features` values is `in_features / block_size` blocks of `type_size`
bytes each, stored back to back (`gguf.constants.GGML_QUANT_SIZES` is the one table of both
sizes). The layouts, as ggml stores them (little-endian; `f16` is an IEEE half):

- Q4_0 (32 values, 18 B): f16 d, 16 B of nibbles; value j < 16 is the low nibble of byte j,
  value j + 16 its high nibble; w = d * (q - 8).
- Q5_0 (32 values, 22 B): f16 d, u32 qh (bit j is the 5th bit of value j), 16 B of nibbles as
  Q4_0; w = d * (q - 16).
- Q8_0 (32 values, 34 B): f16 d, 32 int8 q; w = d * q.
- Q4_K (256 values, 144 B): f16 d, f16 dmin, 12 B of eight 6-bit scales and eight 6-bit mins
  (packed as `gguf.quants.Q4_K.get_scale_min` unpacks them), 128 B of nibbles: 32-byte chunk c
  holds sub-block 2c in its low nibbles and 2c + 1 in its high ones;
  w = (d * scale_s) * q - dmin * min_s for sub-block s of 32 values.
- Q6_K (256 values, 210 B): 128 B ql (low 4 bits), 64 B qh (high 2 bits), 16 int8 scales, f16 d
  at the end. In half h (128 values), value f: low bits are nibble f // 64 of ql[64h + f % 64],
  high bits are bits 2 * (f // 32) of qh[32h + f % 32]; w = (d * scale_(value // 16)) * (q - 32).
- Q8_K (256 values, 292 B): f32 d, 256 int8 q, 16 int16 sums of q by 16 (llama.cpp's
  activation format; the sums are not needed to dequantize); w = d * q.
- F32, F16, BF16: one value per 4, 2, 2 bytes.

Every product d * scale * q above is exact in float32 (at most 11 + 8 + 6 significant bits), so
any kernel that forms the weights this way gets the reference's float32 values bit for bit.
"""

from __future__ import annotations

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QuantType
from gguf.constants import GGML_QUANT_SIZES

_SUPPORTED = frozenset({
    QuantType.F32, QuantType.F16, QuantType.BF16,
    QuantType.Q4_0, QuantType.Q5_0, QuantType.Q8_0,
    QuantType.Q4_K, QuantType.Q6_K, QuantType.Q8_K,
})


class UnsupportedQuantType(ValueError):
    """A GGUF tensor type the engine has no kernel for; the message names it and the ones it has."""

    def __init__(self, qtype: object) -> None:
        name = qtype.name if isinstance(qtype, QuantType) else repr(qtype)
        names = ", ".join(sorted(t.name for t in _SUPPORTED))
        super().__init__(f"GGUF tensor type {name} is not supported by the quantized kernels (supported: {names})")
        self.qtype = qtype


def supported_types() -> frozenset[QuantType]:
    """The GGUF tensor types `QuantLinear` and `QuantEmbedding` multiply in their stored format."""
    return _SUPPORTED


def check_type(qtype: object) -> QuantType:
    """`qtype` as a `GGMLQuantizationType` (an int names one too); `UnsupportedQuantType` otherwise."""
    try:
        qtype = QuantType(qtype)
    except ValueError:
        raise UnsupportedQuantType(qtype) from None
    if qtype not in _SUPPORTED:
        raise UnsupportedQuantType(qtype)
    return qtype


def block_size(qtype: QuantType) -> int:
    """Values per block."""
    return GGML_QUANT_SIZES[qtype][0]


def row_nbytes(qtype: QuantType, in_features: int) -> int:
    """The bytes of one stored row of `in_features` values; a ValueError when the row is not
    whole blocks."""
    size, type_size = GGML_QUANT_SIZES[qtype]
    if in_features <= 0 or in_features % size:
        raise ValueError(f"{qtype.name} rows are blocks of {size} values; {in_features} is not a positive multiple")
    return in_features // size * type_size


def dequantize_reference(qtype: QuantType, rows: np.ndarray) -> np.ndarray:
    """float32 `[n, in]` from the stored uint8 rows `[n, row_bytes]`, by the `gguf` package's
    numpy dequantization (Q8_K, which the package does not dequantize, by its layout above)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    if qtype == QuantType.Q8_K:
        size, type_size = GGML_QUANT_SIZES[qtype]
        blocks = rows.reshape(-1, type_size)
        d = blocks[:, :4].copy().view(np.float32)
        q = blocks[:, 4:4 + size].view(np.int8).astype(np.float32)
        return (d * q).reshape(rows.shape[0], -1)
    return np.asarray(gguf.quants.dequantize(rows, qtype), dtype=np.float32).reshape(rows.shape[0], -1)
