"""Retries through the real SDKs against the recording server: no real sleeping (the sleep is injected)."""

from __future__ import annotations

import random

import pytest
from fake_llm_server import Failure, Hang, Reply, StreamError

from hitrate.harness.models import Quirks
from hitrate.harness.retry import RetryPolicy, backoff_delay, call_with_retries
from hitrate.harness.wire.anthropic import AnthropicBackend
from hitrate.harness.wire.errors import retry_after_seconds
from hitrate.harness.wire.openai_chat import OpenAIChatBackend
from hitrate.harness.wire.types import CallError
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.transcript import TextBlock, Transcript, UserMessage

POLICY = RetryPolicy(max_attempts=4, base_delay_s=1.0, max_delay_s=8.0)


def prompt():
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="hello"),)))
    return Projector(CacheRules(family="anthropic")).project(model="m", tools=[], system="s", transcript=transcript)


def backends(server, timeout_s=30.0):
    return {
        "anthropic": AnthropicBackend(model="m", api_key="k", base_url=server.url, timeout_s=timeout_s),
        "openai": OpenAIChatBackend(model="m", api_key="k", base_url=server.url + "/v1",
                                    quirks=Quirks(usage_dialect="openai_compat"), timeout_s=timeout_s),
    }


def run(backend, slept, retried=None):
    p = prompt()
    return call_with_retries(
        lambda attempt: backend.call(p, max_tokens=10),
        POLICY,
        sleep=slept.append,
        rng=random.Random(0),
        on_retry=(lambda e, a, d: retried.append((e.kind, e.status))) if retried is not None else None,
    )


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_429_with_retry_after_then_success(fake_server, api):
    fake_server.push(Failure(429, {"error": {"type": "rate_limit_error", "message": "slow down"}}, {"retry-after": "7"}),
                     Reply(text="ok"))
    slept: list[float] = []
    retried: list = []
    result = run(backends(fake_server)[api], slept, retried)
    assert result.assistant.content[0].text == "ok"
    assert slept == [7.0] and retried == [("rate_limited", 429)]
    assert len(fake_server.requests) == 2


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize(("status", "kind"), [(529, "overloaded"), (500, "server_error"), (503, "server_error")])
def test_server_errors_back_off_with_full_jitter(fake_server, api, status, kind):
    body = {"error": {"type": "overloaded_error" if status == 529 else "api_error", "message": "busy"}}
    fake_server.push(Failure(status, body), Failure(status, body), Reply(text="ok"))
    slept: list[float] = []
    retried: list = []
    run(backends(fake_server)[api], slept, retried)
    assert retried == [(kind, status), (kind, status)]
    assert 0 <= slept[0] <= 1.0 and 0 <= slept[1] <= 2.0


def test_overloaded_error_inside_a_stream_is_retried(fake_server):
    fake_server.push(StreamError("overloaded_error"), Reply(text="ok"))
    slept: list[float] = []
    retried: list = []
    result = run(backends(fake_server)["anthropic"], slept, retried)
    assert retried == [("overloaded", 200)] and result.assistant is not None


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_timeout_is_retried(fake_server, api):
    fake_server.push(Hang(1.5), Reply(text="ok"))
    slept: list[float] = []
    retried: list = []
    result = run(backends(fake_server, timeout_s=0.3)[api], slept, retried)
    assert retried == [("timeout", None)] and result.assistant is not None


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_bad_request_fails_fast_with_the_servers_message(fake_server, api):
    fake_server.push(Failure(400, {"error": {"type": "invalid_request_error", "message": "max_tokens: must be positive"}}),
                     Reply(text="never"))
    slept: list[float] = []
    with pytest.raises(CallError) as info:
        run(backends(fake_server)[api], slept)
    error = info.value
    assert error.kind == "client_error" and error.status == 400 and not error.retryable
    assert "max_tokens: must be positive" in str(error)
    assert error.attempts == 1 and slept == [] and len(fake_server.requests) == 1


def test_auth_error_says_to_check_the_key(fake_server):
    fake_server.push(Failure(401, {"error": {"type": "authentication_error", "message": "invalid x-api-key"}}))
    with pytest.raises(CallError) as info:
        run(backends(fake_server)["anthropic"], [])
    assert info.value.kind == "auth" and "check the API key" in str(info.value)


def test_connection_refused_is_retried_then_fails_with_attempt_count():
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens here now
    backend = AnthropicBackend(model="m", api_key="k", base_url=f"http://127.0.0.1:{port}")
    slept: list[float] = []
    with pytest.raises(CallError) as info:
        run(backend, slept)
    assert info.value.kind == "connection" and info.value.attempts == POLICY.max_attempts
    assert len(slept) == POLICY.max_attempts - 1
    assert "could not reach the server" in str(info.value)


def test_retry_after_longer_than_the_policy_allows_fails():
    error = CallError("busy", kind="rate_limited", status=429, retry_after_s=3600)
    with pytest.raises(CallError) as info:
        call_with_retries(lambda a: (_ for _ in ()).throw(error), POLICY, sleep=lambda s: None)
    assert "more than" in str(info.value)


def test_backoff_is_capped_full_jitter():
    rng = random.Random(1)
    delays = [backoff_delay(POLICY, attempt, rng) for attempt in range(1, 10) for _ in range(50)]
    assert min(delays) >= 0 and max(delays) <= POLICY.max_delay_s
    assert max(backoff_delay(POLICY, 1, rng) for _ in range(100)) <= 1.0


def test_retry_after_header_forms():
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"retry-after": "12"}) == 12.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_no_retry_wait_runs_past_the_deadline():
    import time

    slept: list[float] = []
    calls: list[int] = []

    def attempt(n: int) -> None:
        calls.append(n)
        raise CallError("busy", kind="rate_limited", status=429, retry_after_s=30.0)

    with pytest.raises(CallError) as caught:
        call_with_retries(attempt, POLICY, sleep=slept.append, deadline=time.monotonic() + 5.0)
    # A 30 s wait would end past the deadline: not waited, not retried, said so.
    assert calls == [1] and slept == [] and caught.value.out_of_time and "wall-time limit" in caught.value.message


def test_no_retry_starts_once_the_deadline_has_passed():
    import time

    calls: list[int] = []

    def attempt(n: int) -> None:
        calls.append(n)
        raise CallError("boom", kind="server_error", status=500)

    with pytest.raises(CallError) as caught:
        call_with_retries(attempt, POLICY, sleep=lambda s: None, deadline=time.monotonic() - 1.0)
    assert calls == [1] and caught.value.out_of_time
