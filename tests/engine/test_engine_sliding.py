"""Sliding-window layers: attention is handed only the keys inside the window (a decode step at a
long context reads `window` keys on those layers, not the whole history), and logits stay exact
past the window, in one piece, in prefill chunks and in batched decode."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from hitrate.engine import modelinfo
from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.batch_kv import BatchKV
from hitrate.engine.runner import TransformersEngine

TOLERANCE = 1e-4
WINDOW = 16
SLIDING = {"sliding_window": WINDOW, "layer_types": ["sliding_attention", "full_attention"]}


def tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 500) for _ in range(n)]


@pytest.fixture(scope="module")
def sliding_path(tiny_model_factory):
    return tiny_model_factory("gemma3_text", config_overrides=SLIDING)


@pytest.fixture(scope="module")
def reference(sliding_path):
    return AutoModelForCausalLM.from_pretrained(sliding_path, dtype=torch.float32).eval()


def full_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()


def test_a_sliding_layer_hands_attention_only_its_window(reference):
    layout = modelinfo.kv_layout(reference)
    kv = BatchKV(layout.shape, rows=2, capacity=8, device=torch.device("cpu"),
                 layer_types=layout.layer_types, windows=layout.windows)
    shape = layout.shape
    cache = kv.row_cache(1)
    sliding, full = cache.layers
    states = lambda n: torch.randn(1, shape.kv_heads, n, shape.head_dim)  # noqa: E731
    for layer in cache.layers:
        layer.update(states(40), states(40))
    cache.commit()
    cache = kv.row_cache(1)  # the same object, synced to the committed length
    assert cache.layers[0] is sliding and sliding.length == 40
    assert sliding.get_mask_sizes(1) == (WINDOW, 40 - WINDOW + 1)
    keys, _ = sliding.update(states(1), states(1))
    assert keys.shape[2] == WINDOW  # keys 25..40: the ones a query at position 40 sees
    keys, _ = full.update(states(1), states(1))
    assert keys.shape[2] == 41
    # A 5-token chunk starting at 41: its first query sees keys from 41 - 16 + 1 = 26 on.
    assert kv.row_cache(1).layers[0].get_mask_sizes(5) == (40 + 5 - 25, 25)


@pytest.mark.parametrize("chunk", [7, 4096])
def test_prefill_in_chunks_and_decode_past_the_window_are_exact(sliding_path, reference, chunk):
    engine = TransformersEngine.from_pretrained(sliding_path, pool_tokens=2048, prefill_chunk=chunk)
    base = tokens(1, 70)  # several windows long
    logits, cached = engine.prefill_logits(base)
    assert cached == 0
    assert float((logits - full_logits(reference, base)).abs().max()) <= TOLERANCE
    branch = base[:45] + tokens(2, 20)  # a cache hit that ends past the window
    logits, cached = engine.prefill_logits(branch)
    assert cached == 45
    assert float((logits - full_logits(reference, branch)[cached:]).abs().max()) <= TOLERANCE
    result = engine.generate(GenerationRequest(prompt_ids=base, params=SamplingParams(max_tokens=30, ignore_eos=True)))
    seq, expected = list(base), []
    for _ in range(30):  # greedy by full recompute, 30 tokens past a 70-token prompt
        expected.append(int(full_logits(reference, seq)[-1].argmax()))
        seq.append(expected[-1])
    assert result.token_ids == expected
