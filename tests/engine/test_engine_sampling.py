"""Nucleus (top-p) sampling keeps exactly the set a full sort of the vocabulary keeps; a draw
follows the weights."""

from __future__ import annotations

import pytest
import torch

from hitrate.engine.sampling import _nucleus_candidates, draw


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


def test_draw_follows_the_weights_and_never_picks_a_zero():
    weights = torch.tensor([0.0, 0.5, 0.0, 0.2, 0.3, 0.0])
    generator = torch.Generator().manual_seed(0)
    n = 20_000
    counts = torch.bincount(torch.tensor([draw(weights, generator) for _ in range(n)]), minlength=6)
    assert counts[0] == counts[2] == counts[5] == 0
    expected = weights / weights.sum() * n
    # Each count within 5 standard deviations of its binomial mean.
    sd = (expected * (1 - weights / weights.sum())).sqrt()
    assert torch.all((counts - expected).abs() <= 5 * sd + 1e-9)


def test_draw_is_reproducible_with_a_seed_and_takes_unnormalised_weights():
    weights = torch.rand(262_144, generator=torch.Generator().manual_seed(1)) * 7
    a = [draw(weights, torch.Generator().manual_seed(5)) for _ in range(3)]
    b = [draw(weights, torch.Generator().manual_seed(5)) for _ in range(3)]
    assert a == b and all(0 <= i < weights.numel() for i in a)
    one_hot = torch.zeros(10)
    one_hot[7] = 3.0
    assert {draw(one_hot) for _ in range(50)} == {7}
