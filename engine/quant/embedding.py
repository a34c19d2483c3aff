"""`QuantEmbedding`: an `nn.Embedding` whose table stays in its GGUF blocks."""

from __future__ import annotations

import torch
from torch import nn

from .formats import QuantType
from .matrix import QuantMatrix


class QuantEmbedding(nn.Module):
    """Looks up rows of a `[num_embeddings, embedding_dim]` table kept as GGUF rows `blocks`,
    dequantizing only the rows asked for (float32). A tied output head is a `QuantLinear` over
    the same `blocks` tensor."""

    def __init__(self, qtype: QuantType | int, blocks: torch.Tensor, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.matrix = QuantMatrix(qtype, blocks, num_embeddings, embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.register_buffer("blocks", blocks, persistent=False)

    @property
    def qtype(self) -> QuantType:
        return self.matrix.qtype

    @property
    def weight_nbytes(self) -> int:
        return self.matrix.nbytes

    def dequantize(self) -> torch.Tensor:
        return self.matrix.rows()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(f"token ids must be integers, got {ids.dtype}")
        return self.matrix.gather(ids.cpu())

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, qtype={self.qtype.name}"
