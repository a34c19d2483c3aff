"""The HTTP server with the real `openai` and `anthropic` SDKs over 127.0.0.1, on a tiny random Llama."""

from __future__ import annotations

import json
import threading
import uuid

import anthropic
import httpx
import openai
import pytest

from hitrate.engine.chat import ChatFormat, ChatMessage
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import create_app
from hitrate.engine.server_thread import ServerThread
from hitrate.engine.serving import common_prefix_length

MODEL = "tiny"
# The current Anthropic SDK has no sampling parameters; the server still honours `temperature`.
GREEDY = {"extra_body": {"temperature": 0}}
LONG_SYSTEM = " ".join(f"Rule {i}: keep the cache warm and the prefix stable." for i in range(40))


@pytest.fixture(scope="module")
def engine(tiny_llama_path):
    return TransformersEngine.from_pretrained(tiny_llama_path, model_name=MODEL, pool_tokens=1 << 15, page_size=1)


@pytest.fixture(scope="module")
def server(engine):
    with ServerThread(create_app(engine, default_max_tokens=16)) as running:
        yield running


@pytest.fixture(scope="module")
def fmt(engine):
    return ChatFormat(engine.tokenizer)  # an independent encoder: the expected prompt ids


@pytest.fixture
def salt():
    return "test-" + uuid.uuid4().hex  # each test its own tenant, so earlier tests cannot warm its cache


def _openai(server, salt):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", default_headers={"X-Cache-Salt": salt},
                         max_retries=0)


def _anthropic(server, salt):
    return anthropic.Anthropic(base_url=server.url, api_key="unused", default_headers={"X-Cache-Salt": salt},
                               max_retries=0)


def _expected_hit(fmt, first: list[ChatMessage], second: list[ChatMessage]) -> tuple[int, int]:
    """(prompt tokens of `second`, tokens it shares with `first`'s prompt)."""
    a, b = fmt.encode(first), fmt.encode(second)
    return len(b), common_prefix_length(a, b)


def test_openai_second_request_reports_the_shared_prefix_as_cached(server, fmt, salt):
    client = _openai(server, salt)
    first = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "What is a radix tree?"}]
    second = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "And a KV pool?"}]
    r1 = client.chat.completions.create(model=MODEL, messages=first, max_tokens=5, temperature=0)
    r2 = client.chat.completions.create(model=MODEL, messages=second, max_tokens=5, temperature=0)
    prompt_tokens, shared = _expected_hit(fmt, [ChatMessage(**m) for m in first], [ChatMessage(**m) for m in second])
    assert shared > 400
    assert r1.usage.prompt_tokens_details.cached_tokens == 0
    assert r2.usage.prompt_tokens == prompt_tokens
    assert r2.usage.prompt_tokens_details.cached_tokens == shared
    assert r2.usage.completion_tokens == 5 and r2.choices[0].finish_reason == "length"
    assert r2.usage.total_tokens == prompt_tokens + 5
    assert r2.model == MODEL and r2.object == "chat.completion"


def test_anthropic_second_request_reports_cache_read_and_uncached_input(server, fmt, salt):
    client = _anthropic(server, salt)
    r1 = client.messages.create(model=MODEL, max_tokens=5, **GREEDY, system=LONG_SYSTEM,
                                messages=[{"role": "user", "content": "What is a radix tree?"}])
    r2 = client.messages.create(model=MODEL, max_tokens=5, **GREEDY, system=LONG_SYSTEM,
                                messages=[{"role": "user", "content": "And a KV pool?"}])
    prompt_tokens, shared = _expected_hit(
        fmt,
        [ChatMessage("system", LONG_SYSTEM), ChatMessage("user", "What is a radix tree?")],
        [ChatMessage("system", LONG_SYSTEM), ChatMessage("user", "And a KV pool?")],
    )
    assert r1.usage.cache_read_input_tokens == 0
    assert r2.usage.cache_read_input_tokens == shared
    # Anthropic's input_tokens is the uncached remainder only; nothing was marked, so nothing written.
    assert r2.usage.input_tokens == prompt_tokens - shared
    assert r2.usage.cache_creation_input_tokens == 0
    assert r2.usage.output_tokens == 5 and r2.stop_reason == "max_tokens"
    assert r2.type == "message" and r2.content[0].type == "text"


def test_next_turn_hits_the_whole_previous_prompt_and_reply(server, salt):
    client = _openai(server, salt)
    messages = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "Hello there."}]
    r1 = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0)
    messages += [{"role": "assistant", "content": r1.choices[0].message.content},
                 {"role": "user", "content": "Go on."}]
    r2 = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3, temperature=0)
    # Everything the model consumed last turn is cached: the prompt and all generated tokens
    # except the last one sampled (it was never fed back through the model).
    assert r2.usage.prompt_tokens_details.cached_tokens == r1.usage.prompt_tokens + r1.usage.completion_tokens - 1


def test_openai_streaming_with_usage(server, salt):
    client = _openai(server, salt)
    messages = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "Stream, please."}]
    plain = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0)
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    usage = chunks[-1].usage
    assert usage.completion_tokens == 8 and usage.prompt_tokens == plain.usage.prompt_tokens
    # The identical prompt was just served, so all of it but the last token comes from the cache.
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1
    without_usage = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=2,
                                                        temperature=0, stream=True))
    assert all(c.usage is None for c in without_usage) and without_usage[-1].choices[0].finish_reason == "length"


def test_anthropic_streaming_event_sequence_and_final_usage(server, salt):
    client = _anthropic(server, salt)
    kwargs = dict(model=MODEL, max_tokens=8, **GREEDY, system=LONG_SYSTEM,
                  messages=[{"role": "user", "content": "Stream, please."}])
    plain = client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [event.type for event in events]
    # message_start already carries the cache split (known once the prompt is prefilled).
    start = events[0].message.usage
    assert (start.input_tokens, start.cache_read_input_tokens) == (final.usage.input_tokens,
                                                                   final.usage.cache_read_input_tokens)
    raw = [e for e in kinds if e in ("message_start", "content_block_start", "content_block_delta",
                                     "content_block_stop", "message_delta", "message_stop")]
    assert raw[0] == "message_start" and raw[1] == "content_block_start"
    assert raw[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert final.content[0].text == plain.content[0].text
    assert final.stop_reason == "max_tokens"
    prompt_tokens = plain.usage.input_tokens + plain.usage.cache_read_input_tokens
    assert final.usage.cache_read_input_tokens == prompt_tokens - 1
    assert final.usage.input_tokens == 1 and final.usage.output_tokens == 8


def test_cache_salt_isolates_tenants(server, salt):
    messages = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "Same prompt."}]
    first = _openai(server, salt).chat.completions.create(model=MODEL, messages=messages, max_tokens=2, temperature=0)
    same = _openai(server, salt).chat.completions.create(model=MODEL, messages=messages, max_tokens=2, temperature=0)
    other = _openai(server, salt + "-other").chat.completions.create(model=MODEL, messages=messages, max_tokens=2,
                                                                     temperature=0)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert same.usage.prompt_tokens_details.cached_tokens == same.usage.prompt_tokens - 1
    assert other.usage.prompt_tokens_details.cached_tokens == 0
    # The body field `cache_salt` (vLLM's name) works when no header is sent.
    plain = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    via_body = plain.chat.completions.create(model=MODEL, messages=messages, max_tokens=2, temperature=0,
                                             extra_body={"cache_salt": salt})
    assert via_body.usage.prompt_tokens_details.cached_tokens == via_body.usage.prompt_tokens - 1


def test_cache_control_marks_are_reported_as_writes_by_ttl(server, engine, salt):
    tokenizer = engine.tokenizer
    head, tail = "Static rules: " + LONG_SYSTEM, "Project notes: use pytest."
    question = "Please summarise the rules."
    kwargs = dict(
        model=MODEL, max_tokens=2, **GREEDY,
        system=[{"type": "text", "text": head, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                {"type": "text", "text": tail}],
        messages=[{"role": "user", "content": [{"type": "text", "text": question,
                                                 "cache_control": {"type": "ephemeral"}}]}],
    )
    client = _anthropic(server, salt)
    first = client.messages.create(**kwargs)
    usage = first.usage
    hour, five = usage.cache_creation.ephemeral_1h_input_tokens, usage.cache_creation.ephemeral_5m_input_tokens
    prompt_ids = ChatFormat(tokenizer).encode([ChatMessage("system", head + "\n" + tail), ChatMessage("user", question)])
    # The 1h mark covers the prompt up to the end of the first system block, the 5m mark the rest
    # up to the end of the marked user block; only the generation prompt is plain input.
    assert tokenizer.decode(prompt_ids[:hour]).endswith(head)
    assert tokenizer.decode(prompt_ids[: hour + five]).endswith(question + "<|im_end|>\n")
    assert usage.cache_creation_input_tokens == hour + five
    assert usage.input_tokens == len(prompt_ids) - hour - five
    assert usage.cache_read_input_tokens == 0
    again = client.messages.create(**kwargs).usage
    assert again.cache_read_input_tokens == len(prompt_ids) - 1 and again.cache_creation_input_tokens == 0
    assert again.input_tokens == 1


def test_concurrent_requests_match_sequential_results(server, salt):
    def request(i: int) -> str:
        system = LONG_SYSTEM if i % 2 else "Short system."
        if i % 3 == 0:
            with _anthropic(server, salt).messages.stream(model=MODEL, max_tokens=6, **GREEDY, system=system,
                                                          messages=[{"role": "user", "content": f"q{i}"}]) as s:
                return s.get_final_message().content[0].text
        if i % 3 == 1:
            r = _openai(server, salt).chat.completions.create(
                model=MODEL, max_tokens=6, temperature=0,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": f"q{i}"}])
            return r.choices[0].message.content
        chunks = _openai(server, salt).chat.completions.create(
            model=MODEL, max_tokens=6, temperature=0, stream=True,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": f"q{i}"}])
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = request(i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert {i: request(i) for i in range(8)} == results


def test_models_health_and_metrics(server, salt):
    models = openai.OpenAI(base_url=server.url + "/v1", api_key="unused").models.list()
    assert [m.id for m in models.data] == [MODEL]
    anthropic_models = anthropic.Anthropic(base_url=server.url, api_key="unused").models.list()
    assert [m.id for m in anthropic_models.data] == [MODEL]
    assert httpx.get(server.url + "/health").json() == {"status": "ok", "model": MODEL}
    _openai(server, salt).chat.completions.create(model=MODEL, max_tokens=1, temperature=0,
                                                  messages=[{"role": "user", "content": "count me"}])
    metrics = httpx.get(server.url + "/metrics").json()
    engine_metrics = metrics["engine"]
    for key in ("hit_rate", "prefill_tokens_computed", "prefill_tokens_saved", "pool_pages_used", "pool_pages_total"):
        assert key in engine_metrics
    assert engine_metrics["prefill_tokens_computed"] > 0
    assert metrics["server"]["requests"]["openai"] >= 1
    assert 0.0 <= metrics["server"]["prompt_hit_rate"] <= 1.0
    text = httpx.get(server.url + "/metrics", params={"format": "prometheus"}).text
    assert "hitrate_engine_hit_rate " in text and "hitrate_server_prompt_tokens " in text


def test_count_tokens_matches_the_served_prompt(server, fmt):
    body = {"model": MODEL, "system": "S", "messages": [{"role": "user", "content": "count these"}]}
    counted = httpx.post(server.url + "/v1/messages/count_tokens", json=body).json()["input_tokens"]
    assert counted == len(fmt.encode([ChatMessage("system", "S"), ChatMessage("user", "count these")]))


# ----------------------------------------------------------------------------- errors


def test_unknown_model_is_404_in_both_shapes(server):
    with pytest.raises(openai.NotFoundError, match="not served here"):
        openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            model="gpt-none", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.NotFoundError) as info:
        anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0).messages.create(
            model="claude-none", max_tokens=1, messages=[{"role": "user", "content": "hi"}])
    assert info.value.body["type"] == "error" and info.value.body["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("body, fragment", [
    ({"model": MODEL, "messages": []}, "messages"),
    ({"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, "role"),
    ({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}]},
     "image_url"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "n": 2}, "n > 1"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "presence_penalty": 0.5}, "presence_penalty"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, "tool_choice"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 100000}, "context window"),
    ({"model": MODEL, "messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
    ({"model": MODEL, "messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}, "not valid JSON"),
])
def test_openai_bad_requests_get_400_with_a_message(server, body, fragment):
    response = httpx.post(server.url + "/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert fragment in error["message"] and error["type"] == "invalid_request_error"


@pytest.mark.parametrize("body, fragment", [
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
    ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]}, "image"),
    ({"model": MODEL, "max_tokens": 5, "top_k": -5, "messages": [{"role": "user", "content": "x"}]}, "top_k"),
    ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text"}]}]},
     "text.text: Field required"),
    ({"model": MODEL, "max_tokens": 5, "tool_choice": {"type": "any"}, "messages": [{"role": "user", "content": "x"}]},
     "tool_choice"),
    ({"model": MODEL, "max_tokens": 0, "stream": True, "messages": [{"role": "user", "content": "x"}]}, "pre-warm"),
])
def test_anthropic_bad_requests_get_400_in_anthropic_shape(server, body, fragment):
    response = httpx.post(server.url + "/v1/messages", json=body)
    assert response.status_code == 400, response.text
    payload = response.json()
    assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"
    assert fragment in payload["error"]["message"]


def test_body_that_is_not_json_is_400(server):
    for path in ("/v1/chat/completions", "/v1/messages"):
        response = httpx.post(server.url + path, content=b"{not json", headers={"content-type": "application/json"})
        assert response.status_code == 400 and "not valid JSON" in response.text


def test_too_long_prompt_is_a_clear_400_streaming_or_not(server, engine):
    words = "cache " * (engine.max_context + 100)
    oa = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="too long") as info:
        oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": words}], max_tokens=4)
    assert info.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError, match="too long"):
        oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": words}], max_tokens=4,
                                   stream=True)
    an = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="too long"):
        with an.messages.stream(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": words}]) as s:
            s.get_final_message()
    # The server is still fine afterwards.
    ok = oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "short"}], max_tokens=1)
    assert ok.usage.completion_tokens == 1


def test_anthropic_prewarm_writes_the_cache_and_returns_nothing(server, salt):
    client = _anthropic(server, salt)
    kwargs = dict(model=MODEL, system=LONG_SYSTEM, messages=[{"role": "user", "content": "warm me"}])
    warm = client.messages.create(max_tokens=0, **kwargs)
    assert warm.content == [] and warm.usage.output_tokens == 0 and warm.stop_reason == "max_tokens"
    hit = client.messages.create(max_tokens=2, **GREEDY, **kwargs)
    assert hit.usage.cache_read_input_tokens == warm.usage.input_tokens - 1


def test_stop_sequences_are_reported(server, salt):
    client = _anthropic(server, salt)
    kwargs = dict(model=MODEL, **GREEDY, system=LONG_SYSTEM, messages=[{"role": "user", "content": "x"}])
    free = client.messages.create(max_tokens=12, **kwargs).content[0].text
    stop = free[3:5]
    if not stop.strip():
        pytest.skip("the generated text has no usable stop string here")
    stopped = client.messages.create(max_tokens=12, stop_sequences=[stop], **kwargs)
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == stop
    assert stopped.content[0].text == free[: free.index(stop)]
    response = httpx.post(server.url + "/v1/chat/completions", headers={"X-Cache-Salt": salt}, json={
        "model": MODEL, "max_tokens": 12, "temperature": 0, "stop": stop,
        "messages": [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "x"}]})
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["content"] == stopped.content[0].text
    json.dumps(response.json())


def test_metrics_counters_are_integers_and_unknown_formats_are_refused(server):
    engine_metrics = httpx.get(server.url + "/metrics").json()["engine"]
    assert type(engine_metrics["requests"]) is int and type(engine_metrics["pool_pages_total"]) is int
    refused = httpx.get(server.url + "/metrics", params={"format": "xml"})
    assert refused.status_code == 400 and "use json or prometheus" in refused.json()["error"]["message"]
