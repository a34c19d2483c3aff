"""A weight matrix kept in its GGUF block format, and the products and lookups on it.

Few rows (a decode step) go through the native kernel, which forms each block's weights in
registers inside the product and reads every weight byte once for all rows. Many rows (a
prefill) are taken a tile of output rows at a time: the tile is dequantized into a float32
scratch small enough to stay in cache and multiplied by torch's sgemm, so the float32 copy of
the whole matrix never exists. Without a C compiler both go through the `gguf` package's numpy
dequantization, tile by tile: slow, but the same weights.
"""

from __future__ import annotations

import torch

from . import formats, native
from .formats import QuantType

# Rows at most this many go through the decode kernel; more are multiplied tile by tile.
DECODE_ROWS = 8
# How the decode kernel takes the activations: "float32" as they are (the product differs from the
# float32 weights' only in summation order), "int8" quantized to 8-bit blocks as ggml's CPU kernels
# do (integer multiply-adds; each activation moves by up to half its block's step, max |x| / 254).
ACTIVATIONS = ("float32", "int8")
# Bytes of float32 weights dequantized per prefill tile. Each tile costs the thread team two
# hand-offs (dequantize, sgemm), which a busy machine makes expensive: measured on 8960x1536 Q4_K
# at 512 rows on two loaded cores, 1 MB tiles took 4.3x the float32 product's CPU time, 16 MB 1.08x
# (one thread: 1.18x and 1.08x). 16 MB puts a layer's matrix in 1-4 tiles and the 151936-row head
# in 58; the float32 copy of a whole matrix never exists.
TILE_BYTES = 1 << 24


class QuantMatrix:
    """`out_features` rows of `in_features` weights stored as GGUF blocks of `qtype` in `blocks`
    (uint8 `[out_features, row_bytes]`, used where it is: a view over a memory map stays one)."""

    __slots__ = ("qtype", "blocks", "out_features", "in_features", "activations", "_kernel")

    def __init__(self, qtype: QuantType | int, blocks: torch.Tensor, out_features: int, in_features: int,
                 activations: str = "float32") -> None:
        if activations not in ACTIVATIONS:
            raise ValueError(f"activations must be one of {', '.join(ACTIVATIONS)}, got {activations!r}")
        self.activations = activations
        self.qtype = formats.check_type(qtype)
        row_bytes = formats.row_nbytes(self.qtype, in_features)
        if blocks.dtype != torch.uint8 or tuple(blocks.shape) != (out_features, row_bytes):
            raise ValueError(f"{self.qtype.name} [{out_features}, {in_features}] needs uint8 blocks "
                             f"[{out_features}, {row_bytes}], got {blocks.dtype} {tuple(blocks.shape)}")
        if blocks.device.type != "cpu" or not blocks.is_contiguous():
            raise ValueError("the blocks must be one contiguous CPU tensor (the rows as the file stores them)")
        self.blocks, self.out_features, self.in_features = blocks, out_features, in_features
        # The kernels take float rows (F32, F16, BF16) 32 values at a time.
        self._kernel = native.load() if in_features % native.FLOAT_RUN == 0 else None

    @property
    def nbytes(self) -> int:
        return self.blocks.numel()

    @property
    def int8_activations(self) -> bool:
        """Whether decode products quantize the activations (asked for, and this type has the kernel;
        Q4_0, Q5_0, Q8_0, Q4_K and Q6_K do where the CPU has AVX2)."""
        return self.activations == "int8" and self._kernel is not None and self._kernel.supports_int8(self.qtype)

    def rows(self, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """The weights of output rows `start:stop` as float32 `[stop - start, in]`."""
        stop = self.out_features if stop is None else stop
        if self._kernel is not None:
            out = torch.empty(stop - start, self.in_features)
            self._kernel.dequantize_rows(self.qtype, self.blocks[start:stop], out)
            return out
        return torch.from_numpy(formats.dequantize_reference(self.qtype, self.blocks[start:stop].numpy()))

    def gather(self, ids: torch.Tensor) -> torch.Tensor:
        """The weights of the rows `ids` (any shape of int64) as float32 `[*ids.shape, in]`."""
        flat = ids.reshape(-1).to(torch.int64)
        if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= self.out_features):
            raise IndexError(f"row ids must be in [0, {self.out_features}), got {int(flat.min())}..{int(flat.max())}")
        if self._kernel is not None:
            out = torch.empty(flat.numel(), self.in_features)
            self._kernel.dequantize_rows(self.qtype, self.blocks, out, flat.contiguous())
        else:
            out = torch.from_numpy(formats.dequantize_reference(self.qtype, self.blocks[flat].numpy()))
        return out.view(*ids.shape, self.in_features)

    def product(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """`x @ W.T (+ bias)` for float32 `x` `[rows, in]`, float32 `[rows, out]`."""
        rows = x.shape[0]
        if self._kernel is not None and 0 < rows <= DECODE_ROWS:
            y = torch.empty(rows, self.out_features)
            if self.int8_activations:
                self._kernel.gemv_int8(self.qtype, self.blocks, x, bias, y)
            else:
                self._kernel.gemv(self.qtype, self.blocks, x, bias, y)
            return y
        return self._tiled_product(x, bias)

    def _tiled_product(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        # y.T row by row of output: each tile's product is a contiguous slice of yt.
        yt = torch.empty(self.out_features, x.shape[0])
        tile = max(16, TILE_BYTES // (4 * self.in_features))
        for start in range(0, self.out_features, tile):
            stop = min(start + tile, self.out_features)
            torch.mm(self.rows(start, stop), x.t(), out=yt[start:stop])
        y = yt.t().contiguous()
        if bias is not None:
            y += bias
        return y

