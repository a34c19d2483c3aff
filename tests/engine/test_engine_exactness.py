"""Cache-served logits equal a full recompute (fp32, max abs diff <= 1e-4) for every case the
prefix cache can produce: full prefix, partial prefix, branching, after eviction (pool gather
instead of the hot buffer) and after a host-tier return."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.runner import TransformersEngine

TOLERANCE = 1e-4
EXACT_ARCHS = ["llama", "qwen2", "gpt2", "phi3"]


def tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 500) for _ in range(n)]


class Reference:
    """Full recompute with the plain model: no cache object at all."""

    def __init__(self, path) -> None:
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()

    def logits(self, ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return self.model(torch.tensor([ids])).logits[0].float()

    def greedy(self, ids: list[int], n: int, eos: int) -> list[int]:
        seq, out = list(ids), []
        while len(out) < n and (not out or out[-1] != eos):
            out.append(int(self.logits(seq)[-1].argmax()))
            seq.append(out[-1])
        return out


def assert_exact(engine: TransformersEngine, reference: Reference, ids: list[int], salt: str = "") -> int:
    logits, cached = engine.prefill_logits(ids, salt)
    expected = reference.logits(ids)[cached:]
    assert logits.shape == expected.shape
    diff = float((logits - expected).abs().max())
    assert diff <= TOLERANCE, f"cached={cached}: max abs diff {diff}"
    return cached


@pytest.fixture(scope="module", params=EXACT_ARCHS)
def arch_path(request, tiny_model_factory):
    return request.param, tiny_model_factory(request.param)


def test_full_partial_and_branching_prefixes(arch_path):
    arch, path = arch_path
    engine = TransformersEngine.from_pretrained(path, pool_tokens=2048)
    reference = Reference(path)
    base = tokens(1, 96)
    assert assert_exact(engine, reference, base) == 0  # cold
    assert assert_exact(engine, reference, base) == len(base) - 1  # full prefix: last token recomputed
    branch_a = base[:64] + tokens(2, 20)
    assert assert_exact(engine, reference, branch_a) == 64  # partial prefix (splits an edge)
    branch_b = base[:64] + tokens(3, 24)
    assert assert_exact(engine, reference, branch_b) == 64  # a sibling branch
    assert assert_exact(engine, reference, branch_a + tokens(4, 8)) == len(branch_a)  # extends branch a
    assert assert_exact(engine, reference, base[:40] + tokens(5, 9)) == 40  # splits the shared edge again
    assert engine.metrics()["hot_buffer_reused_tokens"] > 0


def test_pool_gather_path_after_eviction(arch_path):
    arch, path = arch_path
    engine = TransformersEngine.from_pretrained(path, pool_tokens=160)
    reference = Reference(path)
    first = tokens(10, 100)
    assert_exact(engine, reference, first)
    assert_exact(engine, reference, tokens(11, 90))  # evicts the tail of `first`; replaces the hot buffer
    assert engine.metrics()["evicted_pages"] > 0
    cached = assert_exact(engine, reference, first + tokens(12, 6))
    assert 0 < cached < len(first)  # the surviving head of `first`, gathered from the pool


def test_host_tier_return_is_exact(arch_path):
    arch, path = arch_path
    engine = TransformersEngine.from_pretrained(path, pool_tokens=128, host_tier_tokens=1024)
    reference = Reference(path)
    first = tokens(20, 100)
    assert_exact(engine, reference, first)
    assert_exact(engine, reference, tokens(21, 100))  # pushes `first` to the host tier
    assert_exact(engine, reference, tokens(22, 10))  # hot buffer no longer holds `first`
    cached = assert_exact(engine, reference, first + tokens(23, 5))
    assert cached == len(first)
    assert engine.metrics()["host_tier_hit_tokens"] > 0


def test_page_size_four_is_exact(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=512, page_size=4)
    reference = Reference(tiny_llama_path)
    base = tokens(30, 70)
    assert_exact(engine, reference, base)
    assert assert_exact(engine, reference, tokens(31, 5)) == 0
    assert assert_exact(engine, reference, base[:37] + tokens(32, 11)) == 36  # rounded down to whole pages
    # The buffer now agrees with `base` on 37 tokens while the tree matches 48: positions [37, 48)
    # come from the pool starting in the middle of a page.
    reused = engine.metrics()["hot_buffer_reused_tokens"]
    assert assert_exact(engine, reference, base[:50] + tokens(33, 4)) == 48
    assert engine.metrics()["hot_buffer_reused_tokens"] - reused == 37


def test_decode_matches_greedy_full_recompute(arch_path):
    arch, path = arch_path
    engine = TransformersEngine.from_pretrained(path, pool_tokens=1024)
    reference = Reference(path)
    prompt = tokens(40, 60)
    engine.generate(GenerationRequest(prompt_ids=prompt[:50], params=SamplingParams(max_tokens=4)))
    result = engine.generate(GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=12)))
    assert result.cached_tokens == 50
    assert result.token_ids == reference.greedy(prompt, 12, engine.tokenizer.eos_token_id)
    # The reply was cached too: the next turn hits prompt + reply (minus the last sampled token).
    follow = prompt + result.token_ids + tokens(41, 5)
    again = engine.generate(GenerationRequest(prompt_ids=follow, params=SamplingParams(max_tokens=1)))
    assert again.cached_tokens == len(prompt) + len(result.token_ids) - 1


@pytest.mark.parametrize("arch,overrides", [
    ("mistral", {"sliding_window": 16}),
    ("qwen2", {"use_sliding_window": True, "sliding_window": 16, "max_window_layers": 1}),
    ("gemma2", {"sliding_window": 16}),
])
def test_sliding_window_models_stay_exact_beyond_the_window(tiny_model_factory, arch, overrides):
    path = tiny_model_factory(arch, config_overrides=overrides)
    engine = TransformersEngine.from_pretrained(path, pool_tokens=1024)
    assert any(engine.layout.sliding)
    reference = Reference(path)
    base = tokens(50, 70)  # far longer than the 16-token window
    assert_exact(engine, reference, base)
    assert assert_exact(engine, reference, base[:45] + tokens(51, 12)) == 45
    assert assert_exact(engine, reference, base + tokens(52, 3)) == len(base)
