"""Harness events to app messages: what each agent event becomes on screen."""

from __future__ import annotations

from datetime import datetime, timezone

from hitrate.harness import events as ev
from hitrate.store.usage import Usage
from hitrate.tui import messages as msg
from hitrate.tui.bridge import EventBridge, parse_arguments

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
S = "s1"


def bridge() -> tuple[EventBridge, list]:
    posted: list = []
    return EventBridge(posted.append, backend="anthropic", model="claude-sonnet-4-6"), posted


def recorded(step: int, **kw) -> ev.CallRecorded:
    base = dict(session_id=S, step=step, call_id="c", model="anthropic/claude-sonnet-4-6", usage=Usage(cache_read=5),
                started_at=T0, cost_usd=0.01, miss_reason=None, miss_tokens=None, miss_cost_usd=None, ttft_s=0.1, latency_s=0.2,
                stop_reason="end_turn", epoch=0)
    return ev.CallRecorded(**{**base, **kw})


def test_a_turn_maps_to_typed_messages_in_order():
    sink, posted = bridge()
    sink(ev.SessionStarted(session_id=S, model="m", workspace="/w", task="t"))
    sink(ev.CallStarted(session_id=S, step=1, model="m", prompt_tokens_estimate=1200))
    sink(ev.TextDelta(session_id=S, step=1, text="Hi"))
    sink(recorded(1, miss_reason="cold", miss_tokens=1000, miss_cost_usd=0.003))
    sink(ev.AssistantTurn(session_id=S, step=1, text="Hi", tool_calls=["shell"], replayed=False))
    sink(ev.ToolCallStarted(session_id=S, step=1, call_id="t1", name="shell", arguments='{"command": "ls"}'))
    sink(ev.ToolCallFinished(session_id=S, step=1, call_id="t1", name="shell", is_error=False, content="a\n", metadata={"exit_code": 0}))
    sink(ev.Finished(session_id=S, status="end_turn", summary={}))
    kinds = [type(m).__name__ for m in posted]
    assert kinds == ["CallStarting", "TextDelta", "CallRecorded", "ToolStarted", "ToolFinished", "TurnEnded"]
    figure = posted[2].figure
    assert figure.model == "claude-sonnet-4-6" and figure.started_at == T0 and figure.backend == "anthropic"
    assert (figure.miss_reason, figure.miss_tokens, figure.miss_cost_usd) == ("cold", 1000, 0.003)
    assert posted[3].args == {"command": "ls"}
    assert posted[4].metadata == {"exit_code": 0}
    assert (posted[-1].outcome, posted[-1].detail) == ("finished", "")


def test_unstreamed_text_is_posted_once_and_retries_void_the_stream():
    sink, posted = bridge()
    sink(ev.AssistantTurn(session_id=S, step=1, text="Whole reply", tool_calls=[], replayed=True))
    assert [(type(m).__name__, getattr(m, "text", None)) for m in posted] == [("TextDelta", "Whole reply")]
    posted.clear()
    sink(ev.TextDelta(session_id=S, step=2, text="Half"))
    sink(ev.CallRetrying(session_id=S, step=2, attempt=1, delay_s=0.5, error="overloaded"))
    sink(ev.AssistantTurn(session_id=S, step=2, text="Full", tool_calls=[], replayed=False))
    assert isinstance(posted[1], msg.StreamVoided) and posted[1].error == "overloaded"
    # The retried attempt did not stream: its text is posted whole.
    assert isinstance(posted[2], msg.TextDelta) and posted[2].text == "Full"


def test_stop_statuses():
    for status, outcome in [("cancelled", "cancelled"), ("error", "failed"), ("max_steps", "stopped"), ("max_cost", "stopped")]:
        sink, posted = bridge()
        sink(ev.Finished(session_id=S, status=status, detail="why", summary={}))
        assert (posted[0].outcome, posted[0].detail) == (outcome, "why")


def test_a_failed_call_keeps_its_error_and_unknown_usage():
    sink, posted = bridge()
    sink(recorded(3, usage=Usage(), cost_usd=None, error="cancelled: stop"))
    figure = posted[0].figure
    assert figure.error == "cancelled: stop" and figure.usage.cache_read is None


def test_arguments_that_are_not_a_json_object_are_shown_as_sent():
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("") == {}
    assert parse_arguments("{oops") == {"arguments (not JSON)": "{oops"}
    assert parse_arguments("[1, 2]") == {"arguments": [1, 2]}
