"""Typed messages from the agent worker to the app.

The agent runs in a thread worker and never touches a widget: everything it has to say arrives as
one of these messages, posted with `post_message` (thread-safe), and only the app's handlers change
what is on screen.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from textual.message import Message

from hitrate.tui.figures import CallFigure


class AgentMessage(Message):
    """Base of everything the agent worker posts."""


class TextDelta(AgentMessage):
    """A piece of the model's reply text, as streamed."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class ToolStarted(AgentMessage):
    def __init__(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        super().__init__()
        self.call_id = call_id
        self.name = name
        self.args = args


class ToolFinished(AgentMessage):
    def __init__(self, call_id: str, name: str, content: str, is_error: bool, metadata: dict[str, Any]) -> None:
        super().__init__()
        self.call_id = call_id
        self.name = name
        self.content = content
        self.is_error = is_error
        self.metadata = metadata


class CallRecorded(AgentMessage):
    """A model call finished and is in the ledger."""

    def __init__(self, figure: CallFigure) -> None:
        super().__init__()
        self.figure = figure


class EpochStarted(AgentMessage):
    """The cached head changed (model, tools, system or docs): what follows starts cold."""

    def __init__(self, number: int, reason: str, changes: tuple[str, ...], model: str) -> None:
        super().__init__()
        self.number = number
        self.reason = reason
        self.changes = changes
        self.model = model


class HarnessTurnAdded(AgentMessage):
    """The harness told the model something it did not ask for: a repair turn, a nudge after the same
    failing call, or a format-error turn (`harness.events.HarnessTurn`)."""

    def __init__(self, kind: str, reason: str, text: str) -> None:
        super().__init__()
        self.kind = kind
        self.reason = reason
        self.text = text


class TurnEnded(AgentMessage):
    """The agent stopped: `outcome` is "finished", "stopped" (a limit), "cancelled" or "failed"."""

    def __init__(self, outcome: str, detail: str = "") -> None:
        super().__init__()
        self.outcome = outcome
        self.detail = detail


class ApprovalRequested(AgentMessage):
    """A tool wants to change something; the worker waits on `reply` for the user's answer."""

    def __init__(self, tool: str, args: dict[str, Any], reply: Future[Any]) -> None:
        """`reply` takes a `dialogs.ApprovalAnswer`."""
        super().__init__()
        self.tool = tool
        self.args = args
        self.reply = reply


class CallStarting(AgentMessage):
    """A model request is about to be sent."""

    def __init__(self, step: int, model: str, prompt_tokens_estimate: int) -> None:
        super().__init__()
        self.step = step
        self.model = model
        self.prompt_tokens_estimate = prompt_tokens_estimate


class StreamVoided(AgentMessage):
    """The attempt that streamed the current text failed and will be retried: its text is void."""

    def __init__(self, error: str, delay_s: float, attempt: int) -> None:
        super().__init__()
        self.error = error
        self.delay_s = delay_s
        self.attempt = attempt


class ModelSwitched(AgentMessage):
    """A /model switch finished resolving the new backend (`error` set when it could not)."""

    def __init__(self, spec: str, error: str | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.error = error


class KeepAliveEnded(AgentMessage):
    """A keep-alive warm-up worker finished (its call, if one was sent, arrived as CallRecorded);
    `error` says what went wrong outside the call itself."""

    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error


class Notice(AgentMessage):
    """Something a worker has to tell the user that is not agent output (a checkpoint failed)."""

    def __init__(self, text: str, kind: str = "info") -> None:
        super().__init__()
        self.text = text
        self.kind = kind
