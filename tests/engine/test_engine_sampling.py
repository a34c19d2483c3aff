"""Nucleus (top-p) sampling keeps exactly the set a full sort of the vocabulary keeps."""

from __future__ import annotations

import pytest
import torch

from hitrate.engine.sampling import _nucleus_candidates


def full_sort_nucleus(probs: torch.Tensor, top_p: float) -> set[int]:
    sorted_probs, order = torch.sort(probs, descending=True)
    keep = (torch.cumsum(sorted_probs, -1) - sorted_probs) < top_p
    return set(order[keep].tolist())


@pytest.mark.parametrize("spread", [0.5, 3.0, 1000.0])  # peaked, typical, almost uniform
@pytest.mark.parametrize("top_p", [1e-9, 0.5, 0.9, 0.999])
def test_nucleus_candidates_keep_the_full_sort_set(spread, top_p):
    generator = torch.Generator().manual_seed(int(spread * 10) + int(top_p * 1000))
    probs = torch.softmax(torch.randn(50_000, generator=generator) / spread * 4, dim=-1)
    top, order = _nucleus_candidates(probs, top_p)
    assert torch.all(top[:-1] >= top[1:])  # descending
    keep = (torch.cumsum(top, -1) - top) < top_p
    assert set(order[keep].tolist()) == full_sort_nucleus(probs, top_p)
