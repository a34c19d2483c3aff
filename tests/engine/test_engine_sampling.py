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


def _counts(logits: torch.Tensor, n: int = 4000, **params) -> torch.Tensor:
    from hitrate.engine.api import SamplingParams
    from hitrate.engine.sampling import sample

    generator = torch.Generator().manual_seed(3)
    p = SamplingParams(temperature=params.pop("temperature", 1.0), **params)
    return torch.bincount(torch.tensor([sample(logits, p, generator) for _ in range(n)]), minlength=logits.numel())


def test_top_k_draws_only_the_k_best_in_proportion():
    probs = torch.tensor([0.05, 0.4, 0.1, 0.3, 0.15])
    counts = _counts(probs.log(), top_k=2)
    assert counts[[0, 2, 4]].sum() == 0  # only tokens 1 and 3
    share = counts[1] / (counts[1] + counts[3])
    assert abs(float(share) - 0.4 / 0.7) < 0.04  # renormalised over the two kept


def test_min_p_drops_tokens_below_a_share_of_the_best():
    probs = torch.tensor([0.5, 0.3, 0.12, 0.08])
    counts = _counts(probs.log(), min_p=0.2)  # threshold 0.1: token 3 (0.08) goes
    assert counts[3] == 0 and counts[:3].min() > 0


def test_top_k_with_top_p_and_temperature_zero():
    probs = torch.tensor([0.05, 0.4, 0.1, 0.3, 0.15])
    # top_k 3 keeps {1, 3, 4} renormalised to (0.47, 0.35, 0.18); top_p 0.8 then keeps {1, 3}.
    counts = _counts(probs.log(), top_k=3, top_p=0.8)
    assert counts[[0, 2, 4]].sum() == 0 and counts[1] > 0 and counts[3] > 0
    assert _counts(probs.log(), n=5, temperature=0.0, top_k=3).tolist() == [0, 5, 0, 0, 0]


def test_bad_top_k_and_min_p_are_refused():
    from hitrate.engine.api import EngineError, SamplingParams
    from hitrate.engine.sampling import validate_params

    with pytest.raises(EngineError, match="top_k"):
        validate_params(SamplingParams(top_k=-1))
    with pytest.raises(EngineError, match="min_p"):
        validate_params(SamplingParams(min_p=1.5))


def test_sampling_defaults_come_from_the_generation_config_then_the_family():
    from transformers import GenerationConfig

    from hitrate.engine import sampling_defaults as sd

    qwen = sd.from_generation_config(GenerationConfig(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05))
    assert (qwen.temperature, qwen.top_p, qwen.top_k, qwen.min_p) == (0.7, 0.8, 20, 0.0)
    assert sd.from_generation_config(GenerationConfig()) is None  # sets nothing: not the model's choice
    assert sd.from_generation_config(GenerationConfig(do_sample=False)).temperature == 0.0
    family = sd.for_family("qwen2.5-coder-0.5b-instruct", None)
    assert (family.temperature, family.top_p, family.top_k) == (0.7, 0.8, 20)
    assert sd.for_family("tiny-tools", "/tmp/x") is None
    assert sd.for_family("gemma-3-270m-it").top_k == 64

    class Engine:  # a GGUF-loaded model: transformers leaves every sampling field unset
        model_name = "qwen2.5-coder-1.5b-instruct-q4_k_m"
        model = type("M", (), {"generation_config": GenerationConfig(), "config": None})()

    assert sd.for_engine(Engine()).top_k == 20
    Engine.model_name = "my-model"
    assert sd.for_engine(Engine()) == sd.SamplingDefaults()
