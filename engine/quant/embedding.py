"""`QuantEmbedding`: an `nn.Embedding` whose table stays in its GGUF blocks."""

from __future__ import annotations

import torch

from .formats import QuantType
from .matrix import QuantMatrix
from .weights import QuantWeights


class QuantEmbedding(QuantWeights):
    """Looks up rows of a `[num_embeddings, embedding_dim]` table kept as GGUF rows `blocks`,
    dequantizing only the rows asked for (float32). A tied output head is a `QuantLinear` over
    the same `blocks` tensor."""

    def __init__(self, qtype: QuantType | int, blocks: torch.Tensor, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__(QuantMatrix(qtype, blocks, num_embeddings, embedding_dim), blocks)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(f"token ids must be integers, got {ids.dtype}")
        return self.matrix.gather(ids.cpu())

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, qtype={self.qtype.name}"
