"""A session's tool calls: run in order and answered, or answered unrun, so the transcript stays
valid (every call answered) whatever stops them."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any, Callable

from hitrate.harness.events import ToolCallFinished, ToolCallStarted, jsonable_metadata
from hitrate.harness.interruptible import Cancelled
from hitrate.harness.session_inputs import SessionInputs
from hitrate.harness.text_protocol import observation_text
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock, ToolResultBlock, UserMessage
from hitrate.tools.base import ToolContext, ToolResult


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

    def run_tools(
        self, step: int, assistant: AssistantMessage, cancel: threading.Event | None = None,
        follow_up: Callable[[ToolCallBlock, ToolResult], str | None] | None = None,
    ) -> UserMessage:
        """Run the turn's tool calls in order and append their results as the next user turn.

        `follow_up` sees each call with its outcome; a text it returns (a nudge, `harness.repair`) is
        added after the results, in the same user turn.

        `cancel` reaches the tools (a running shell command stops when it is set). If the session
        is cancelled part-way, the calls not yet run are answered with an error result, so the
        transcript stays valid (every call answered) and can be continued.
        """
        context = self.tool_context if cancel is None else dataclasses.replace(self.tool_context, cancel=cancel)
        results: list[ToolResultBlock] = []
        notes: list[TextBlock] = []
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
            result = ToolResultBlock(call_id=call.call_id, content=outcome.content, is_error=outcome.is_error)
            results.append(result)
            self.emit(
                ToolCallFinished(
                    session_id=self.id, step=step, call_id=call.call_id, name=call.name, is_error=outcome.is_error,
                    content=outcome.content, metadata=jsonable_metadata(outcome.metadata),
                )
            )
            note = follow_up(call, outcome) if follow_up is not None else None
            if note is not None:
                notes.append(TextBlock(text=note))
        message = UserMessage(content=(*results, *notes))
        self._append(message)
        if interrupted is not None:
            raise Cancelled("cancelled while tools were running") from interrupted
        return message

    def run_text_command(
        self, step: int, command: str, cancel: threading.Event | None = None,
        follow_up: Callable[[ToolCallBlock, ToolResult], str | None] | None = None,
    ) -> UserMessage:
        """Under the text protocol: run the command of the model's shell block with the `shell`
        tool (same sandbox and approvals as a native call) and append its output as the next user
        turn. Announced as a `shell` call, so every view shows it as one."""
        context = self.tool_context if cancel is None else dataclasses.replace(self.tool_context, cancel=cancel)
        call = ToolCallBlock(call_id=f"text_{step:03d}", name="shell", arguments=json.dumps({"command": command}))
        self.emit(ToolCallStarted(session_id=self.id, step=step, call_id=call.call_id, name=call.name, arguments=call.arguments))
        interrupted: BaseException | None = None
        try:
            outcome = self.inputs.tools.execute("shell", {"command": command}, context)
        except KeyboardInterrupt as exc:
            interrupted = exc
            outcome = ToolResult(content="interrupted by the user", is_error=True)
        self.emit(
            ToolCallFinished(
                session_id=self.id, step=step, call_id=call.call_id, name=call.name, is_error=outcome.is_error,
                content=outcome.content, metadata=jsonable_metadata(outcome.metadata),
            )
        )
        note = follow_up(call, outcome) if follow_up is not None and interrupted is None else None
        blocks = [TextBlock(text=observation_text(outcome.content))] + ([TextBlock(text=note)] if note else [])
        message = UserMessage(content=tuple(blocks))
        self._append(message)
        if interrupted is not None:
            raise Cancelled("cancelled while the command was running") from interrupted
        return message
