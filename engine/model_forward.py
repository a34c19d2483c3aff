"""The model's own forward over `BatchKV` cache views: prefill chunks, and decode steps for a
model the fast step (`engine.fast_decode`) does not cover.

Both decoders share one interface with the scheduler: `decode_row(kv, row, token)` and
`decode_rows(kv, tokens)` return the step's logits and leave committing the new length to the
caller; `can_batch` says whether rows of different lengths can share a step.
"""

from __future__ import annotations

import torch

from hitrate.engine.batch_kv import BatchKV


class ModelForward:
    def __init__(self, model, *, logits_to_keep: bool, batch_mask_implementation: str | None) -> None:
        """`batch_mask_implementation`: the mask format batched steps hand the model (None: the
        model cannot take prepared batch masks, so rows decode one at a time)."""
        self.model = model
        self.logits_to_keep = logits_to_keep
        self.batch_mask_implementation = batch_mask_implementation

    @property
    def can_batch(self) -> bool:
        return self.batch_mask_implementation is not None

    def __call__(self, input_ids: torch.Tensor, cache, *, keep_all: bool, **kwargs) -> torch.Tensor:
        """Logits of the forward over `input_ids` on `cache` (only the last position's unless
        `keep_all`, where the model can skip the others)."""
        if not keep_all and self.logits_to_keep:
            kwargs["logits_to_keep"] = 1
        with torch.inference_mode():
            return self.model(input_ids=input_ids, cache=cache, use_cache=True, **kwargs).logits

    def decode_row(self, kv: BatchKV, row: int, token: int) -> torch.Tensor:
        cache = kv.row_cache(row)
        return self(torch.tensor([[token]], device=kv.device), cache, keep_all=False)[:, -1]

    def decode_rows(self, kv: BatchKV, tokens: list[int]) -> torch.Tensor:
        cache = kv.decode_cache(len(tokens))
        mask = kv.decode_masks(cache.positions, self.batch_mask_implementation)
        return self(
            torch.tensor(tokens, device=kv.device)[:, None], cache, keep_all=False,
            position_ids=cache.positions[:, None], attention_mask=mask,
        )[:, -1]
