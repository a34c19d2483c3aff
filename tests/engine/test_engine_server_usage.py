"""Exact Anthropic usage in `message_start` and one pin per cache_control mark, over HTTP with the
real `anthropic` SDK on a tiny random Llama."""

from __future__ import annotations

import threading
import uuid

import anthropic
import pytest

from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.chat import ChatFormat, ChatMessage
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import create_app
from hitrate.engine.server_thread import ServerThread

MODEL = "tiny"
GREEDY = {"extra_body": {"temperature": 0}}
HEAD = " ".join(f"Rule {i}: keep the head of the prompt stable." for i in range(12))
SPLIT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _client(server, salt: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="unused", default_headers={"X-Cache-Salt": salt},
                               max_retries=0)


def _marked(question: str, *, head_ttl: str = "1h", tail_ttl: str = "5m", max_tokens: int = 4) -> dict:
    """A request with a cache_control mark on the static head and one on the newest user block."""
    return dict(
        model=MODEL, max_tokens=max_tokens, **GREEDY,
        system=[{"type": "text", "text": HEAD, "cache_control": {"type": "ephemeral", "ttl": head_ttl}}],
        messages=[{"role": "user", "content": [{"type": "text", "text": question,
                                                 "cache_control": {"type": "ephemeral", "ttl": tail_ttl}}]}],
    )


def _raw_stream_usage(client: anthropic.Anthropic, body: dict) -> tuple[dict, dict]:
    """(message_start usage, message_delta usage) from the SDK's raw server-sent events."""
    start = delta = None
    with client.messages.create(stream=True, **body) as stream:
        for event in stream:
            if event.type == "message_start":
                start = event.message.usage.model_dump()
            elif event.type == "message_delta":
                delta = event.usage.model_dump()
    assert start is not None and delta is not None
    return start, delta


def _split(usage: dict) -> dict:
    return {key: usage[key] for key in (*SPLIT_KEYS, "cache_creation")}


class _GatedEngine:
    """The real engine, except that each stream waits until `parties` streams have been asked for:
    concurrent requests are all in flight (prepared, streams started) before the engine serves any
    of them, so each one's split must come from its own match, not from counters read around it."""

    def __init__(self, engine: TransformersEngine, parties: int) -> None:
        self._engine = engine
        self._barrier = threading.Barrier(parties, timeout=60)

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def stream(self, request: GenerationRequest):
        self._barrier.wait()
        yield from self._engine.stream(request)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def engine(tiny_llama_path):
    return TransformersEngine.from_pretrained(tiny_llama_path, model_name=MODEL, pool_tokens=1 << 14)


@pytest.fixture(scope="module")
def server(engine):
    with ServerThread(create_app(engine, default_max_tokens=16)) as running:
        yield running


@pytest.fixture
def salt():
    return "usage-" + uuid.uuid4().hex


def test_message_start_carries_the_exact_split_cold_and_warm(server, salt):
    client = _client(server, salt)
    cold_start, cold_delta = _raw_stream_usage(client, _marked("First question?"))
    assert cold_start["cache_read_input_tokens"] == 0
    assert cold_start["cache_creation"]["ephemeral_1h_input_tokens"] > 0
    assert cold_start["cache_creation"]["ephemeral_5m_input_tokens"] > 0
    assert _split(cold_start) == _split(cold_delta)
    assert cold_start["output_tokens"] == 0 and cold_delta["output_tokens"] == 4

    warm_start, warm_delta = _raw_stream_usage(client, _marked("Second question?"))
    assert warm_start["cache_read_input_tokens"] >= cold_start["cache_creation"]["ephemeral_1h_input_tokens"]
    assert _split(warm_start) == _split(warm_delta)
    # The non-streamed message for the same state reports the same split.
    again_start, _ = _raw_stream_usage(client, _marked("Second question?"))
    plain = client.messages.create(**_marked("Second question?")).usage.model_dump()
    assert _split(plain) == _split(again_start)


def test_message_start_is_exact_for_two_concurrent_clients(engine, salt):
    fmt = ChatFormat(engine.tokenizer)
    questions = ["Which rule comes first?", "Which rule comes last?"]
    usages: dict[int, tuple[dict, dict]] = {}
    errors: list[BaseException] = []
    with ServerThread(create_app(_GatedEngine(engine, parties=2), default_max_tokens=16)) as gated:

        def run(i: int) -> None:
            try:
                usages[i] = _raw_stream_usage(_client(gated, salt), _marked(questions[i], max_tokens=6))
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert not errors, errors
    reads = []
    for i, (start, delta) in usages.items():
        assert _split(start) == _split(delta), f"client {i}: message_start differs from the final usage"
        prompt = fmt.encode([ChatMessage("system", HEAD), ChatMessage("user", questions[i])])
        assert sum(start[key] for key in SPLIT_KEYS) == len(prompt)
        reads.append(start["cache_read_input_tokens"])
    # One of them ran first on a cold cache; the other read at least the shared marked head.
    assert sorted(reads)[0] == 0 and sorted(reads)[1] > 0


def test_every_mark_is_pinned_for_its_own_ttl(tiny_llama_path, salt):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, model_name=MODEL, pool_tokens=1200)
    clock = _Clock()
    engine.radix.clock = clock  # expiry without sleeping
    fmt = ChatFormat(engine.tokenizer)

    def pressure(seed: int) -> None:  # fresh prompts under another tenant, enough to refill the pool
        for i in range(4):
            ids = [(seed * 31 + i * 7 + j) % 500 + 3 for j in range(400)]
            engine.generate(GenerationRequest(prompt_ids=ids, params=SamplingParams(max_tokens=1), salt="pressure"))

    with ServerThread(create_app(engine, default_max_tokens=16)) as server:
        client = _client(server, salt)
        first = client.messages.create(**_marked("Summarise the rules."))
        hour = first.usage.cache_creation.ephemeral_1h_input_tokens
        five = first.usage.cache_creation.ephemeral_5m_input_tokens
        assert hour > 0 and five > 0
        assert engine.metrics()["pins_active"] == 2
        prompt = fmt.encode([ChatMessage("system", HEAD), ChatMessage("user", "Summarise the rules.")])

        pressure(1)
        assert engine.radix.match_length(prompt, salt) == hour + five  # both marks hold, the rest went
        clock.now += 301  # the 5m mark has run out, the 1h mark has not
        pressure(2)
        assert engine.radix.match_length(prompt, salt) == hour  # the tail was evicted, the head stayed
        other = client.messages.create(**_marked("List the rules."))
        assert other.usage.cache_read_input_tokens == hour
