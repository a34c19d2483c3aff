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


# ---------------------------------------------------------------------- sliding-window pages


def per_layer_bytes(engine: TransformersEngine) -> int:
    shape = engine.layout.shape
    return shape.bytes_per_token // shape.layers


def test_pages_beyond_the_window_are_released_and_the_accounted_bytes_drop(sliding_path, reference):
    engine = TransformersEngine.from_pretrained(sliding_path, pool_tokens=2048)
    assert engine.window_layers == [0]  # layer 0 slides, layer 1 is full attention
    prompt = tokens(3, 200)
    result = engine.generate(GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=8, ignore_eos=True)))
    m = engine.metrics()
    cached = len(prompt) + len(result.token_ids) - 1  # prompt + reply, minus the last sampled token
    assert m["pool_pages_used"] == cached
    assert m["window_pages_used"] == WINDOW  # only the window before the cached end is held
    assert m["window_released_pages"] > 0
    layer = per_layer_bytes(engine)
    assert m["kv_bytes_per_token_all_layers"] == 2 * layer
    assert m["kv_bytes_per_cached_token"] == (cached * layer + WINDOW * layer) // cached
    # The next turn hits prompt + reply whole, and its logits are exact.
    follow = prompt + result.token_ids + tokens(4, 5)
    logits, hit = engine.prefill_logits(follow)
    assert hit == cached
    assert float((logits - full_logits(reference, follow)[hit:]).abs().max()) <= TOLERANCE


def test_a_hit_whose_window_was_reclaimed_ends_earlier_and_stays_exact(sliding_path, reference):
    """Released window pages stay hit-able until another end needs the room: with room for ten
    windows, an old mid-sequence branch point loses its window once newer sequences reclaim it,
    and the hit falls back to an end whose window is still whole."""
    engine = TransformersEngine.from_pretrained(sliding_path, pool_tokens=2048, window_pool_tokens=10 * WINDOW)
    first = tokens(5, 120)
    engine.prefill_logits(first)
    branch = first[:60] + tokens(6, 10)
    logits, hit = engine.prefill_logits(branch)  # released, not yet reclaimed: still a full hit
    assert hit == 60
    assert float((logits - full_logits(reference, branch)[hit:]).abs().max()) <= TOLERANCE
    for seed in range(7, 11):  # other sequences reclaim the released window pages
        engine.prefill_logits(tokens(seed, 50))
    assert engine.radix.stats.window_reclaimed_pages > 0 and engine.metrics()["evicted_pages"] == 0
    other = first[:90] + tokens(12, 6)
    logits, hit = engine.prefill_logits(other)
    assert hit < 90 and engine.metrics()["window_shortened_hits"] > 0
    assert float((logits - full_logits(reference, other)[hit:]).abs().max()) <= TOLERANCE
    # Whatever was reclaimed, the end of each cached sequence is still hit whole and exact.
    logits, hit = engine.prefill_logits(first + tokens(13, 4))
    assert hit == len(first)
    assert float((logits - full_logits(reference, first + tokens(13, 4))[hit:]).abs().max()) <= TOLERANCE


def test_window_pages_are_off_with_a_host_tier_or_when_asked(sliding_path):
    for engine in (TransformersEngine.from_pretrained(sliding_path, pool_tokens=256, host_tier_tokens=256),
                   TransformersEngine.from_pretrained(sliding_path, pool_tokens=256, window_pool_tokens=0)):
        assert engine.window_layers == [] and not engine.pool.windowed
        engine.prefill_logits(tokens(14, 100))
        m = engine.metrics()
        assert m["window_pages_total"] == 0
        assert m["kv_bytes_per_cached_token"] == m["kv_bytes_per_token_all_layers"]


def test_window_pages_with_four_token_pages_are_exact(sliding_path, reference):
    engine = TransformersEngine.from_pretrained(sliding_path, pool_tokens=1024, page_size=4)
    assert engine.pool.windowed
    base = tokens(20, 90)
    engine.prefill_logits(base)
    assert engine.metrics()["window_pages_used"] == WINDOW // 4
    for ids, expected_hit in ((base[:50] + tokens(21, 7), 48), (base + tokens(22, 3), 88)):
        logits, hit = engine.prefill_logits(ids)
        assert hit == expected_hit  # whole pages only
        assert float((logits - full_logits(reference, ids)[hit:]).abs().max()) <= TOLERANCE
    result = engine.generate(GenerationRequest(prompt_ids=base, params=SamplingParams(max_tokens=6, ignore_eos=True)))
    seq = list(base)
    for token in result.token_ids:
        assert token == int(full_logits(reference, seq)[-1].argmax())
        seq.append(token)


def test_a_lease_holds_its_window_while_other_ends_reclaim_released_pages():
    """A request matched on released (still valid) window pages reads them only when its prefill
    starts; ends inserted meanwhile must not reclaim them."""
    from hitrate.engine.radix import RadixCache

    cache = RadixCache(1000, 1, window_tokens=4, window_pages=34)
    first = list(range(100, 130))
    cache.finish(cache.begin(first), first, lambda *args: None)
    assert cache.window_used_pages == 4 and cache.window_released_pages == 26
    lease = cache.begin(first[:20] + [1, 2], max_match=20)
    assert lease.matched == 20
    held = lease.windows[16:20]
    assert min(held) >= 0
    for seed in range(5):  # 50 pages of windows, 4 free: the oldest released pages are reclaimed
        other = [1000 + 10 * seed + i for i in range(10)]
        cache.finish(cache.begin(other), other, lambda *args: None)
    node_windows = lease.node.window  # the match split `first` at 20: one node, positions 0..19
    assert len(node_windows) == 20
    assert list(node_windows[:16]) == [-1] * 16  # first's released head: reclaimed by the others
    assert node_windows[16:20] == held  # the lease's window: untouched
    idle = set(cache._window_free) | set(cache._window_released)
    assert not idle & set(held)
    cache.finish(lease, first[:20] + [1, 2], lambda *args: None)
