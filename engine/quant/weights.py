"""`QuantWeights`: what a module over one GGUF matrix has whatever it does with it."""

from __future__ import annotations

import torch
from torch import nn

from .formats import QuantType
from .matrix import QuantMatrix


class QuantWeights(nn.Module):
    """A module over one `QuantMatrix`: its type, the bytes it keeps, its float32 weights. The
    `blocks` tensor is registered as a (non-persistent) buffer so `.to()`/`state_dict` see it."""

    def __init__(self, matrix: QuantMatrix, blocks: torch.Tensor) -> None:
        super().__init__()
        self.matrix = matrix
        self.register_buffer("blocks", blocks, persistent=False)

    @property
    def qtype(self) -> QuantType:
        return self.matrix.qtype

    @property
    def weight_nbytes(self) -> int:
        """The bytes the weights take in memory (the stored blocks)."""
        return self.matrix.nbytes

    def dequantize(self) -> torch.Tensor:
        """The float32 weights, one row per output (or per token of an embedding)."""
        return self.matrix.rows()
