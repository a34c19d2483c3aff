"""TransformersEngine behaviour: streaming, sampling, stops, limits, errors, isolation, threads."""

from __future__ import annotations

import json
import random
import shutil
import threading

import pytest
from transformers import AutoConfig, AutoModelForCausalLM

from hitrate.engine.api import (
    ContextLengthError,
    EngineError,
    GenerationChunk,
    GenerationRequest,
    GenerationResult,
    PrefillStarted,
    SamplingParams,
    UnsupportedArchitectureError,
)
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.tiny import build_tokenizer


def tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 500) for _ in range(n)]


def req(prompt, salt="", **params) -> GenerationRequest:
    return GenerationRequest(prompt_ids=prompt, params=SamplingParams(**params), salt=salt)


@pytest.fixture(scope="module")
def engine(tiny_llama_path) -> TransformersEngine:
    return TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096)


def test_stream_yields_prefill_started_then_chunks_then_the_result(engine):
    items = list(engine.stream(req(tokens(1, 30), max_tokens=8)))
    started, chunks, result = items[0], items[1:-1], items[-1]
    assert all(isinstance(c, GenerationChunk) for c in chunks) and isinstance(result, GenerationResult)
    assert started == PrefillStarted(prompt_tokens=30, cached_tokens=result.cached_tokens)
    assert [t for c in chunks for t in c.token_ids] == result.token_ids
    assert "".join(c.text for c in chunks) == result.text
    assert result.completion_tokens == len(result.token_ids) <= 8
    assert result.prompt_tokens == 30 and 0 < result.ttft_s <= result.total_s
    if result.finish_reason == "length":
        assert len(result.token_ids) == 8
    assert engine.model_name and engine.max_context == 8192


def test_text_matches_tokenizer_decode(engine):
    result = engine.generate(req(tokens(2, 20), max_tokens=16))
    ids = [t for t in result.token_ids if t != engine.tokenizer.eos_token_id]
    assert result.text == engine.tokenizer.decode(ids, skip_special_tokens=True)


def test_stop_string_cuts_the_text_and_is_never_streamed(engine):
    prompt = tokens(3, 25)
    free = engine.generate(req(prompt, max_tokens=24))
    visible = free.text
    if len(visible) < 6:
        pytest.skip("the random model produced too little text to cut")
    stop = visible[3:6]
    cut = visible.index(stop)
    items = list(engine.stream(req(prompt, max_tokens=24, stop=(stop, "never-produced"))))
    result = items[-1]
    assert result.text == visible[:cut]
    assert result.finish_reason == "stop"
    assert "".join(c.text for c in items[1:-1]) == visible[:cut]


def test_seeded_sampling_is_reproducible_and_tiny_top_p_is_greedy(engine):
    prompt = tokens(4, 20)
    a = engine.generate(req(prompt, max_tokens=10, temperature=1.5, seed=7))
    b = engine.generate(req(prompt, max_tokens=10, temperature=1.5, seed=7))
    assert a.token_ids == b.token_ids
    greedy = engine.generate(req(prompt, max_tokens=10))
    nucleus = engine.generate(req(prompt, max_tokens=10, temperature=1.0, top_p=1e-9, seed=3))
    assert nucleus.token_ids == greedy.token_ids
    draws = {tuple(engine.generate(req(prompt, max_tokens=6, temperature=5.0, seed=s)).token_ids) for s in range(4)}
    assert len(draws) > 1  # high temperature really samples


def test_eos_from_generation_config_stops(tiny_llama_path, tmp_path):
    prompt = tokens(5, 15)
    first = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=512).generate(req(prompt, max_tokens=3))
    folder = tmp_path / "eos-model"
    shutil.copytree(tiny_llama_path, folder)
    config_file = folder / "generation_config.json"
    config = json.loads(config_file.read_text())
    config["eos_token_id"] = [config["eos_token_id"], first.token_ids[1]]
    config_file.write_text(json.dumps(config))
    result = TransformersEngine.from_pretrained(folder, pool_tokens=512).generate(req(prompt, max_tokens=10))
    assert result.token_ids == first.token_ids[:2]
    assert result.finish_reason == "stop"


def test_prompt_longer_than_context_is_a_clear_error(tiny_model_factory):
    engine = TransformersEngine.from_pretrained(tiny_model_factory("llama", max_positions=64), pool_tokens=256)
    with pytest.raises(ContextLengthError, match="context window is 64 tokens"):
        engine.generate(req(tokens(6, 70), max_tokens=1))
    with pytest.raises(ContextLengthError, match="60 in the prompt"):
        engine.generate(req(tokens(6, 60), max_tokens=10))
    assert engine.generate(req(tokens(6, 60), max_tokens=4)).prompt_tokens == 60  # still serving


@pytest.mark.parametrize(
    "prompt,params,message",
    [
        ([], {}, "empty"),
        ([1, 2, 100_000], {}, "token ids"),
        ([1, 2], {"max_tokens": 0}, "max_tokens"),
        ([1, 2], {"temperature": -1.0}, "temperature"),
        ([1, 2], {"top_p": 0.0}, "top_p"),
    ],
)
def test_bad_requests_are_refused_with_a_message(engine, prompt, params, message):
    with pytest.raises(EngineError, match=message):
        engine.generate(req(prompt, **params))


@pytest.mark.parametrize("pins", [((-1, 60.0),), ((10, -1.0),), ((10, float("inf")),), ((2.5, 60.0),), ((10,),)])
def test_bad_pins_are_refused_with_a_message(engine, pins):
    with pytest.raises(EngineError, match="each pin must be"):
        engine.generate(GenerationRequest(prompt_ids=[1, 2, 3], pins=pins))


def test_recurrent_architectures_are_refused(tmp_path):
    config = AutoConfig.for_model("mamba", vocab_size=512, hidden_size=32, num_hidden_layers=2, state_size=4)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    build_tokenizer().save_pretrained(tmp_path)
    with pytest.raises(UnsupportedArchitectureError, match="cannot be cut at an arbitrary prefix"):
        TransformersEngine.from_pretrained(tmp_path)


def test_missing_model_is_an_engine_error(tmp_path):
    with pytest.raises(EngineError, match="could not load model"):
        TransformersEngine.from_pretrained(tmp_path / "nothing-here", local_files_only=True)


def test_salts_are_isolated_in_the_engine(engine):
    prompt = tokens(7, 40)
    engine.generate(req(prompt, salt="tenant-a", max_tokens=1))
    assert engine.generate(req(prompt, salt="tenant-b", max_tokens=1)).cached_tokens == 0
    assert engine.generate(req(prompt, salt="tenant-a", max_tokens=1)).cached_tokens == 39


def test_metrics_count_computed_and_saved_prefill(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=1024)
    prompt = tokens(8, 50)
    engine.generate(req(prompt, max_tokens=2))
    engine.generate(req(prompt + tokens(9, 10), max_tokens=2))
    m = engine.metrics()
    assert m["requests"] == 2 and m["prompt_tokens"] == 110
    assert m["prefill_tokens_saved"] == m["cached_tokens"] == 50
    assert m["prefill_tokens_computed"] == 110 - 50
    assert m["decode_tokens"] == 2  # one fed token per request (the last sampled one is never fed)
    assert m["hit_rate"] == pytest.approx(50 / 110)
    assert m["pool_pages_total"] == 1024 and 0 < m["pool_pages_used"] <= 1024


def test_closing_a_stream_releases_the_engine_and_keeps_the_prefix(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=1024)
    prompt = tokens(10, 30)
    stream = engine.stream(req(prompt, max_tokens=50))
    taken = [next(stream) for _ in range(5)][1:]  # after PrefillStarted
    stream.close()
    fed = [c.token_ids[0] for c in taken[:3]]  # the 4th token was sampled but never fed
    result = engine.generate(req(prompt + fed + tokens(11, 3), max_tokens=1))
    assert result.cached_tokens == len(prompt) + len(fed)


def _unreleased_locks(engine: TransformersEngine) -> int:
    stack = [n for root in engine.radix._roots.values() for n in root.children.values()]
    held = 0
    while stack:
        node = stack.pop()
        held += node.lock - (node in engine.radix._pins)
        stack.extend(node.children.values())
    return held


def test_prefill_started_comes_before_any_compute_and_closing_there_frees_the_engine(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=1024)
    prefix = tokens(30, 40)
    engine.generate(req(prefix + [7] * 5, max_tokens=1))
    before = engine.metrics()
    stream = engine.stream(req(prefix + [8] * 10, max_tokens=5))
    assert next(stream) == PrefillStarted(prompt_tokens=50, cached_tokens=40)
    during = engine.metrics()
    assert during["prefill_tokens_computed"] == before["prefill_tokens_computed"]  # matched, not computed
    assert during["requests"] == before["requests"]
    stream.close()  # the client left at message_start: the lease is released, nothing is inserted
    assert _unreleased_locks(engine) == 0
    assert engine.metrics()["pool_pages_used"] == before["pool_pages_used"]
    assert engine.generate(req(prefix + [8] * 10, max_tokens=1)).cached_tokens == 40


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_each_pin_keeps_its_own_ttl_a_1h_head_outlives_a_5m_tail(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=200)
    clock = _Clock()
    engine.radix.clock = clock  # expiry without sleeping
    head, tail = tokens(40, 40), tokens(41, 40)
    prompt = head + tail + tokens(42, 5)
    engine.generate(GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=1),
                                      pins=((40, 3600.0), (80, 300.0))))
    assert engine.metrics()["pins_active"] == 2 and engine.metrics()["pinned_pages"] == 80

    def pressure(seed: int) -> None:  # 4 x 90 fresh tokens through a 200-token pool
        for i in range(4):
            engine.generate(req(tokens(seed + i, 90), salt="pressure", max_tokens=1))

    evicted = engine.metrics()["evicted_pages"]
    pressure(100)
    assert engine.metrics()["evicted_pages"] > evicted
    assert engine.radix.match_length(prompt) == 80  # both pins hold; the unpinned end went
    clock.now += 301  # the 5m pin has run out, the 1h one has not
    pressure(200)
    assert engine.radix.match_length(prompt) == 40
    assert engine.metrics()["pins_active"] == 1 and engine.metrics()["pinned_pages"] == 40
    assert engine.generate(req(head + tokens(43, 20), max_tokens=1)).cached_tokens == 40
    assert _unreleased_locks(engine) == 0


def test_concurrent_requests_match_serial_results(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=2048)
    shared = tokens(20, 40)
    prompts = [shared + tokens(21 + i, 10) for i in range(6)]
    fresh = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=2048)
    serial = [fresh.generate(req(p, max_tokens=6)).token_ids for p in prompts]
    results: dict[int, list[int]] = {}

    def work(i: int) -> None:
        results[i] = engine.generate(req(prompts[i], max_tokens=6)).token_ids

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [results[i] for i in range(len(prompts))] == serial
    assert engine.metrics()["cached_tokens"] >= 40 * (len(prompts) - 1)
