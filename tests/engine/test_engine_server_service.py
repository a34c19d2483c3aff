"""`ChatService` (what both HTTP front ends and in-process callers use) and stream plumbing."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from hitrate.engine.api import ContextLengthError, GenerationChunk, PrefillStarted
from hitrate.engine.chat import ChatMessage
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import create_app
from hitrate.engine.server_thread import ServerThread
from hitrate.engine.serving import ChatRequest, ChatService, MarkedPrefix, ThreadedStream

SYSTEM = "You are terse. " * 20


@pytest.fixture(scope="module")
def engine(tiny_llama_path):
    return TransformersEngine.from_pretrained(tiny_llama_path, model_name="tiny", pool_tokens=1 << 14)


@pytest.fixture(scope="module")
def service(engine):
    return ChatService(engine, default_max_tokens=7)


def test_chat_in_process_with_turn_over_turn_cache_hits(service):
    messages = [ChatMessage("system", SYSTEM), ChatMessage("user", "first")]
    first = service.run(ChatRequest(messages=messages, temperature=0, salt="in-process"))
    assert first.result.completion_tokens == 7 and first.finish == "length"  # the service default
    messages += [ChatMessage("assistant", first.content), ChatMessage("user", "second")]
    second = service.run(ChatRequest(messages=messages, max_tokens=2, temperature=0, salt="in-process"))
    assert second.cached_tokens == first.prompt_tokens + first.result.completion_tokens - 1


def test_prepare_pins_every_mark_for_its_own_ttl(service, engine):
    head = [ChatMessage("system", SYSTEM), ChatMessage("user", "")]
    messages = [ChatMessage("system", SYSTEM), ChatMessage("user", "question one")]
    request = ChatRequest(messages=messages, marks=[MarkedPrefix(head, [], 3600.0), MarkedPrefix(messages, [], 300.0)])
    prepared = service.prepare(request)
    ids = prepared.generation.prompt_ids
    tokenizer = engine.tokenizer
    (hour_end, hour), (five_end, five) = prepared.generation.pins  # shortest prefix first
    assert (hour, five) == (3600.0, 300.0) and hour_end < five_end
    assert tokenizer.decode(ids[:hour_end]).endswith(SYSTEM + "<|im_end|>\n<|im_start|>user\n")
    assert tokenizer.decode(ids[:five_end]).endswith("question one<|im_end|>\n")
    assert prepared.pin_ttl_by_tokens == {hour_end: 3600.0, five_end: 300.0}
    whole = service.prepare(ChatRequest(messages=messages, pin_whole_prompt_ttl_s=3600.0)).generation
    assert whole.pins == ((len(ids), 3600.0),)
    assert service.prepare(ChatRequest(messages=messages)).generation.pins == ()


def test_capping_service_lowers_max_tokens_to_the_room_left(engine):
    capping = ChatService(engine, default_max_tokens=7, cap_max_tokens=True)
    probe = capping.prepare(ChatRequest(messages=[ChatMessage("user", "hi")]))
    room = engine.max_context - probe.prompt_tokens
    big = capping.prepare(ChatRequest(messages=[ChatMessage("user", "hi")], max_tokens=room + 4096))
    assert big.generation.params.max_tokens == room
    small = capping.prepare(ChatRequest(messages=[ChatMessage("user", "hi")], max_tokens=3))
    assert small.generation.params.max_tokens == 3


def test_prepare_sizes_max_tokens_to_the_room_left(service, engine):
    room_left = lambda prepared: engine.max_context - prepared.prompt_tokens  # noqa: E731
    short = service.prepare(ChatRequest(messages=[ChatMessage("user", "hi")]))
    assert short.generation.params.max_tokens == 7
    with pytest.raises(ContextLengthError, match="lower max_tokens to at most"):
        service.prepare(ChatRequest(messages=[ChatMessage("user", "hi")], max_tokens=room_left(short) + 1))
    exact = service.prepare(ChatRequest(messages=[ChatMessage("user", "hi")], max_tokens=room_left(short)))
    assert exact.generation.params.max_tokens == room_left(short)


def test_stream_yields_text_deltas_then_the_same_reply_as_complete(service):
    request = ChatRequest(messages=[ChatMessage("user", "stream me")], max_tokens=6, temperature=0, salt="s1")
    prepared = service.prepare(request)
    started, *deltas, reply = list(service.stream(prepared))
    assert started == PrefillStarted(prompt_tokens=prepared.prompt_tokens, cached_tokens=reply.cached_tokens)
    assert all(isinstance(d, str) for d in deltas) and len(deltas) == 6  # one per generated token
    whole = service.complete(service.prepare(request))
    assert "".join(deltas) == reply.content == whole.content
    assert reply.result.token_ids == whole.result.token_ids


def test_closing_a_stream_early_frees_the_engine(service):
    request = ChatRequest(messages=[ChatMessage("user", "long")], max_tokens=200, temperature=0)
    stream = service.stream(service.prepare(request))
    next(stream), next(stream)
    stream.close()  # without this the engine lock would stay held and the next call would hang
    assert service.run(ChatRequest(messages=[ChatMessage("user", "next")], max_tokens=1)).result.completion_tokens == 1


async def test_threaded_stream_cancel_closes_the_generator():
    closed = threading.Event()
    produced = []

    def endless():
        try:
            for i in range(10_000):
                produced.append(i)
                time.sleep(0.001)
                yield GenerationChunk(token_ids=[i], text=str(i))
        finally:
            closed.set()

    stream = ThreadedStream(endless)
    seen = []
    async for item in stream:
        seen.append(item.token_ids[0])
        if len(seen) == 3:
            stream.cancel()
            break
    assert await asyncio.to_thread(closed.wait, 10)
    assert seen == [0, 1, 2] and len(produced) < 10_000


async def test_threaded_stream_delivers_errors_to_the_consumer():
    def failing():
        yield GenerationChunk(token_ids=[1], text="a")
        raise ContextLengthError("too long")

    stream = ThreadedStream(failing)
    got = []
    with pytest.raises(ContextLengthError):
        async for item in stream:
            got.append(item)
    assert len(got) == 1


def test_client_disconnect_stops_generation(engine):
    with ServerThread(create_app(engine)) as server:
        decoded_before = engine.metrics()["decode_tokens"]
        body = {"model": "tiny", "max_tokens": 1000, "temperature": 0, "stream": True,
                "messages": [{"role": "user", "content": "Keep talking."}]}
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=60) as response:
            lines = response.iter_lines()
            data = [line for line in (next(lines) for _ in range(8)) if line.startswith("data:")]
            assert len(data) >= 3
        # The engine is free again once the abandoned stream is closed ...
        after = httpx.post(server.url + "/v1/chat/completions", timeout=60, json={
            "model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": "next"}]})
        assert after.status_code == 200
        # ... and it did not go on generating the abandoned reply to its max_tokens.
        assert engine.metrics()["decode_tokens"] - decoded_before < 500
