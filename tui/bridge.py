"""Turns the harness's agent events into the app's typed messages.

The bridge is the agent's event sink: it is called on the worker thread, keeps a little state
(which steps already streamed text) and only ever calls `post`. Every string from the model, a
tool or a server passes through `terminal_text` here, so no widget receives a terminal control
sequence (Textual, like Rich, passes ESC through to the terminal).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from hitrate.harness import events as ev
from hitrate.harness.terminal_text import VisibleStream, visible, visible_value
from hitrate.tui import messages as msg
from hitrate.tui.figures import CallFigure

#: How the agent's stop statuses read on screen.
_OUTCOME = {
    "end_turn": "finished",
    "cancelled": "cancelled",
    "error": "failed",
    "max_steps": "stopped",
    "max_cost": "stopped",
    "max_wall": "stopped",
    "max_tokens": "stopped",
    "context_full": "stopped",
    "refused": "refused",
}


def parse_arguments(arguments: str) -> dict[str, Any]:
    """Tool arguments as the model sent them: a JSON object, or the raw text when it is not one
    (the tool will report the error; the panel still shows what was sent)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return {"arguments (not JSON)": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


class EventBridge:
    """An `EventSink` for one agent turn."""

    def __init__(self, post: Callable[[msg.AgentMessage], None], backend: str, model: str) -> None:
        self._post = post
        self._backend = backend
        # Events name the model by its spec label; figures use the wire name, like the ledger.
        self._model = model
        self._streamed_steps: set[int] = set()
        self._text = VisibleStream()
        self.outcome: str | None = None

    def __call__(self, event: BaseModel) -> None:
        if isinstance(event, ev.TextDelta):
            self._streamed_steps.add(event.step)
            shown = self._text.feed(event.text)
            if shown:
                self._post(msg.TextDelta(shown))
            return
        held = self._text.flush()  # the stream ended on a lone CR: show it before what follows
        if held:
            self._post(msg.TextDelta(held))
        if isinstance(event, ev.CallStarted):
            self._post(msg.CallStarting(event.step, event.model, event.prompt_tokens_estimate))
        elif isinstance(event, ev.CallRetrying):
            self._streamed_steps.discard(event.step)
            self._post(msg.StreamVoided(visible(event.error), event.delay_s, event.attempt))
        elif isinstance(event, ev.CallRecorded):
            self._post(msg.CallRecorded(self._figure(event)))
        elif isinstance(event, ev.ToolCallStarted):
            args = visible_value(parse_arguments(event.arguments))
            self._post(msg.ToolStarted(event.call_id, visible(event.name), args))  # type: ignore[arg-type]
        elif isinstance(event, ev.ToolCallFinished):
            self._post(msg.ToolFinished(event.call_id, visible(event.name), visible(event.content), event.is_error,
                                        dict(event.metadata)))  # fmt: skip
        elif isinstance(event, ev.EpochStarted):
            self._post(msg.EpochStarted(event.number, visible(event.reason), tuple(event.changes), event.model))
        elif isinstance(event, ev.AssistantTurn):
            # A backend that does not stream (or a replayed turn) produced text nobody saw yet.
            if event.text and event.step not in self._streamed_steps:
                self._post(msg.TextDelta(visible(event.text)))
        elif isinstance(event, ev.HarnessTurn):
            self._post(msg.HarnessTurnAdded(event.kind, visible(event.reason), visible(event.text)))
        elif isinstance(event, ev.Finished):
            self.outcome = _OUTCOME.get(event.status, "stopped")
            detail = event.detail or ("" if event.status == "end_turn" else event.status)
            self._post(msg.TurnEnded(self.outcome, visible(detail)))

    def _figure(self, event: ev.CallRecorded) -> CallFigure:
        # started_at is the request's start: the TTL countdown's anchor.
        return CallFigure(number=0, backend=self._backend, model=self._model, epoch=event.epoch, **ev.call_facts(event))
