"""A session's tool calls: run in order and answered, or answered unrun, so the transcript stays
valid (every call answered) whatever stops them."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable

from hitrate.harness.events import ToolCallFinished, ToolCallStarted, jsonable_metadata
from hitrate.harness.interruptible import Cancelled
from hitrate.harness.session_inputs import SessionInputs
from hitrate.projection.transcript import AssistantMessage, ToolResultBlock, UserMessage
from hitrate.tools.base import ToolContext


class SessionTools:
    """Tool running of a `Session` (a mixin: the session supplies what is declared here)."""

    id: str
    inputs: SessionInputs
    tool_context: ToolContext
    emit: Callable[[Any], None]
    _append: Callable[[UserMessage | AssistantMessage], None]

    def answer_tools_unrun(self, assistant: AssistantMessage, reason: str) -> UserMessage:
        """Answer every tool call of `assistant` with an error result `reason`, running none, so
        the transcript stays valid (every call answered)."""
        message = UserMessage(content=tuple(
            ToolResultBlock(call_id=call.call_id, content=reason, is_error=True) for call in assistant.tool_calls
        ))
        self._append(message)
        return message

    def run_tools(self, step: int, assistant: AssistantMessage, cancel: threading.Event | None = None) -> UserMessage:
        """Run the turn's tool calls in order and append their results as the next user turn.

        `cancel` reaches the tools (a running shell command stops when it is set). If the session
        is cancelled part-way, the calls not yet run are answered with an error result, so the
        transcript stays valid (every call answered) and can be continued.
        """
        context = self.tool_context if cancel is None else dataclasses.replace(self.tool_context, cancel=cancel)
        results: list[ToolResultBlock] = []
        interrupted: BaseException | None = None
        for call in assistant.tool_calls:
            if interrupted is None and cancel is not None and cancel.is_set():
                interrupted = Cancelled("cancelled before all tools ran")
            if interrupted is not None:
                results.append(ToolResultBlock(call_id=call.call_id, content="not run: the session was cancelled", is_error=True))
                continue
            self.emit(ToolCallStarted(session_id=self.id, step=step, call_id=call.call_id, name=call.name, arguments=call.arguments))
            try:
                outcome = self.inputs.tools.execute(call.name, call.arguments, context)
            except KeyboardInterrupt as exc:
                interrupted = exc
                results.append(ToolResultBlock(call_id=call.call_id, content="interrupted by the user", is_error=True))
                continue
            results.append(ToolResultBlock(call_id=call.call_id, content=outcome.content, is_error=outcome.is_error))
            self.emit(
                ToolCallFinished(
                    session_id=self.id, step=step, call_id=call.call_id, name=call.name, is_error=outcome.is_error,
                    content=outcome.content, metadata=jsonable_metadata(outcome.metadata),
                )
            )
        message = UserMessage(content=tuple(results))
        self._append(message)
        if interrupted is not None:
            raise Cancelled("cancelled while tools were running") from interrupted
        return message
