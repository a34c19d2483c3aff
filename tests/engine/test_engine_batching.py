"""Continuous batching: a batch of concurrent requests produces exactly what each request produces
alone (greedy: identical tokens; batched decode logits within 1e-4 of a full recompute, fp32), a
long prompt is prefilled in chunks between the other requests' decode steps, and a client that
goes away frees its row at once."""

from __future__ import annotations

import random
import threading
import time

import pytest
import torch
from transformers import AutoModelForCausalLM

from hitrate.engine import modelinfo
from hitrate.engine.api import GenerationChunk, GenerationRequest, GenerationResult, SamplingParams
from hitrate.engine.batch_kv import BatchKV
from hitrate.engine.runner import TransformersEngine

TOLERANCE = 1e-4  # fp32, as for the prefix cache (test_engine_exactness)
SLIDING = {"sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"]}


def tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 500) for _ in range(n)]


def req(prompt, salt="", **params) -> GenerationRequest:
    params.setdefault("ignore_eos", True)
    return GenerationRequest(prompt_ids=prompt, params=SamplingParams(**params), salt=salt)


@pytest.fixture(scope="module", params=["llama", "qwen2", "gpt2", "phi3", "gemma3_sliding"])
def arch_path(request, tiny_model_factory):
    if request.param == "gemma3_sliding":
        return request.param, tiny_model_factory("gemma3_text", config_overrides=SLIDING)
    return request.param, tiny_model_factory(request.param)


def run_concurrently(engine: TransformersEngine, requests: list[GenerationRequest]) -> list[GenerationResult]:
    results: dict[int, GenerationResult] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(requests))

    def work(i: int) -> None:
        try:
            start.wait()
            results[i] = engine.generate(requests[i])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return [results[i] for i in range(len(requests))]


def test_batched_decode_logits_equal_a_full_recompute(arch_path):
    """Rows of different lengths (past a 16-token sliding window too) decoded in one forward."""
    arch, path = arch_path
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    layout = modelinfo.kv_layout(model)
    kv = BatchKV(layout.shape, rows=4, capacity=8, device=torch.device("cpu"),
                 layer_types=layout.layer_types, windows=layout.windows)
    seqs = [tokens(1, 37), tokens(2, 5), tokens(3, 20), tokens(4, 1)]
    implementation = model.config._attn_implementation
    with torch.no_grad():
        for row, seq in enumerate(seqs):
            cache = kv.row_cache(row)
            model(input_ids=torch.tensor([seq]), cache=cache, use_cache=True)
            cache.commit()
        for step in range(4):
            new = tokens(10 + step, len(seqs))
            kv.ensure_capacity(max(kv.lengths) + 1)
            cache = kv.decode_cache(len(seqs))
            mask = kv.decode_masks(cache.positions, implementation)
            out = model(input_ids=torch.tensor(new)[:, None], position_ids=cache.positions[:, None],
                        attention_mask=mask, cache=cache, use_cache=True).logits[:, -1]
            cache.commit(list(range(len(seqs))))
            for row, seq in enumerate(seqs):
                seq.append(new[row])
                full = model(input_ids=torch.tensor([seq])).logits[0, -1]
                diff = float((full - out[row]).abs().max())
                assert diff <= TOLERANCE, f"{arch} row {row} step {step}: {diff}"


@pytest.mark.parametrize("fast", [True, False], ids=["fast-decode", "model-forward"])
def test_concurrent_batch_gives_each_request_its_single_request_tokens(arch_path, fast):
    """Against requests run one at a time through the model's own forward."""
    arch, path = arch_path
    shared = tokens(20, 30)
    prompts = [tokens(21, 3), shared + tokens(22, 9), tokens(23, 40), shared + tokens(24, 2), tokens(25, 17),
               shared + tokens(26, 25)]
    lengths = [12, 7, 15, 10, 3, 9]
    alone = TransformersEngine.from_pretrained(path, pool_tokens=4096, max_batch=1, fast_decode=False)
    expected = [alone.generate(req(p, max_tokens=n, temperature=0)).token_ids for p, n in zip(prompts, lengths)]
    engine = TransformersEngine.from_pretrained(path, pool_tokens=4096, max_batch=4, fast_decode=fast)
    assert engine.metrics()["batched_decode"] == 1 and engine.batch_check_diff <= TOLERANCE
    results = run_concurrently(engine, [req(p, max_tokens=n, temperature=0) for p, n in zip(prompts, lengths)])
    assert [r.token_ids for r in results] == expected
    m = engine.metrics()
    assert 2 <= m["peak_decode_batch"] <= 4  # the requests really shared decode steps, never more than the rows
    assert m["running_requests"] == 0 and m["batch_rows"] <= 4
    assert alone.metrics()["batch_rows"] == 1  # rows are added as concurrency grows


def test_seeded_sampling_is_the_same_alone_and_in_a_batch(tiny_llama_path):
    prompts = [tokens(30 + i, 10 + i) for i in range(4)]
    make = lambda p: req(p, max_tokens=8, temperature=0.9, top_p=0.9, seed=7)  # noqa: E731
    alone = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=2048, max_batch=1)
    expected = [alone.generate(make(p)).token_ids for p in prompts]
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=2048)
    assert [r.token_ids for r in run_concurrently(engine, [make(p) for p in prompts])] == expected


def test_a_long_prompt_is_prefilled_between_the_other_requests_decode_steps(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, interleave_chunk=16)
    events: list[tuple[str, str]] = []
    short = engine.stream(req(tokens(40, 8), max_tokens=60))
    next(short)  # PrefillStarted
    events.append(("short", type(next(short)).__name__))  # decoding has begun
    long_prompt = tokens(41, 600)  # 38 chunks of 16 tokens while `short` decodes

    def read_long() -> None:
        for item in engine.stream(req(long_prompt, max_tokens=2)):
            events.append(("long", type(item).__name__))

    reader = threading.Thread(target=read_long)
    reader.start()
    for item in short:
        events.append(("short", type(item).__name__))
    reader.join(60)
    first_long_token = events.index(("long", "GenerationChunk"))
    started = events.index(("long", "PrefillStarted"))
    decoded_meanwhile = sum(1 for who, kind in events[started:first_long_token] if who == "short")
    assert decoded_meanwhile >= 10, events  # not stalled for the whole 600-token prefill


@pytest.mark.parametrize("fast", [True, False], ids=["fast-decode", "model-forward"])
def test_requests_that_arrive_together_are_prefilled_in_one_step_and_decode_together(tiny_llama_path, fast):
    """Every decode step runs all three rows: none starts a step late, so none ends a step early
    and the last steps never run at a smaller batch."""
    from hitrate.engine.sequence import make_sequence

    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, fast_decode=fast)
    scheduler = engine._scheduler
    assert (engine.fast_decoder is not None) == fast, engine.fast_decode_off_reason
    shapes: list[tuple[int, int]] = []
    forward = scheduler.forward

    def recording(input_ids, *args, **kwargs):
        shapes.append(tuple(input_ids.shape))
        return forward(input_ids, *args, **kwargs)

    scheduler.forward = recording  # prefill chunks
    decoder = scheduler.decoder  # decode steps, fast or through the model's forward
    rows, row = decoder.decode_rows, decoder.decode_row
    decoder.decode_rows = lambda kv, toks: (shapes.append((len(toks), 1)), rows(kv, toks))[1]
    decoder.decode_row = lambda kv, r, tok: (shapes.append((1, 1)), row(kv, r, tok))[1]
    requests = [req(tokens(60 + i, 5 + 7 * i), max_tokens=6) for i in range(3)]
    seqs = []
    with scheduler._cv:  # the worker admits all three at once
        for r in requests:
            seq = make_sequence(r, list(r.prompt_ids))
            seq.acked = True  # as if each consumer had already taken PrefillStarted
            seqs.append(scheduler.submit(seq))
    results = []
    for seq in seqs:
        while not isinstance(item := seq.out.get(timeout=60), GenerationResult):
            assert not isinstance(item, BaseException), item
        results.append(item)
    assert [len(r.token_ids) for r in results] == [6, 6, 6]
    prefills, decodes = shapes[:3], shapes[3:]
    assert [p[1] for p in prefills] == [5, 12, 19]
    assert decodes == [(3, 1)] * 5, shapes


def test_a_client_that_goes_away_frees_its_row_at_once(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, max_batch=1)
    prompt = tokens(50, 20)
    stream = engine.stream(req(prompt, max_tokens=500))
    taken = [next(stream) for _ in range(4)]
    assert engine.metrics()["running_requests"] == 1
    started = time.perf_counter()
    stream.close()
    assert engine.metrics()["running_requests"] == 0
    # The only row is free again: the next request runs now, and hits what the first computed.
    result = engine.generate(req(prompt + [c.token_ids[0] for c in taken[1:3]] + tokens(51, 4), max_tokens=2))
    assert result.cached_tokens >= len(prompt) + 2
    assert time.perf_counter() - started < 30


def test_requests_beyond_max_batch_wait_for_a_row(tiny_llama_path):
    prompts = [tokens(60 + i, 6 + 3 * i) for i in range(5)]
    alone = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=2048, max_batch=1)
    expected = [alone.generate(req(p, max_tokens=6, temperature=0)).token_ids for p in prompts]
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=2048, max_batch=2)
    results = run_concurrently(engine, [req(p, max_tokens=6, temperature=0) for p in prompts])
    assert [r.token_ids for r in results] == expected
    assert engine.metrics()["peak_decode_batch"] <= 2


def test_a_request_sharing_a_prompt_being_prefilled_waits_and_hits_it(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096)
    system = tokens(70, 200)
    results = run_concurrently(engine, [req(system + tokens(71 + i, 5), max_tokens=3) for i in range(4)])
    # One request computes the shared 200 tokens; the others are admitted after its prefill.
    assert sorted(r.cached_tokens for r in results)[1:] == [200, 200, 200]


def test_stream_items_arrive_in_order_for_each_batched_request(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=2048)
    kinds: dict[int, list[str]] = {}

    def work(i: int) -> None:
        kinds[i] = [type(x).__name__ for x in engine.stream(req(tokens(80 + i, 9), max_tokens=5))]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(k == ["PrefillStarted"] + ["GenerationChunk"] * 5 + ["GenerationResult"] for k in kinds.values())


def test_a_stalled_request_holds_back_one_that_shares_its_prompt_only_for_a_while(tiny_llama_path, monkeypatch):
    from hitrate.engine import scheduler

    monkeypatch.setattr(scheduler, "_MAX_SHARED_WAIT_S", 0.3)
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096)
    system = tokens(90, 120)
    stalled = engine.stream(req(system + tokens(91, 4), max_tokens=3))
    next(stalled)  # PrefillStarted, then never read again: its prefill does not start
    started = time.perf_counter()
    result = engine.generate(req(system + tokens(92, 4), max_tokens=3))
    assert result.cached_tokens == 0 and time.perf_counter() - started < 30
    stalled.close()


def test_reset_cache_waits_for_running_requests_then_forgets_every_prefix(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096)
    prompt = tokens(95, 30)
    engine.generate(req(prompt, max_tokens=2))
    stream = engine.stream(req(tokens(96, 20), max_tokens=6000))  # runs for seconds
    next(stream), next(stream)  # running
    done = threading.Event()
    resetter = threading.Thread(target=lambda: (engine.reset_cache(), done.set()))
    resetter.start()
    assert not done.wait(0.3)  # held while the stream runs
    stream.close()
    assert done.wait(30)
    assert engine.metrics()["pool_pages_used"] == 0
    assert engine.generate(req(prompt, max_tokens=1)).cached_tokens == 0
