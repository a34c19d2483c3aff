"""What the agent does with a reply that is not a usable call: a repair turn, a format-error turn,
a nudge after the same failing call, or the end of the run, with the reason it ended.

One `HarnessTurns` per run keeps the little state this needs (was the last turn a repair? which
call failed last, how often?) and counts the turns it added by kind, for the run's result.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING, Callable

from hitrate.harness.call_shapes import call_shape
from hitrate.harness.events import HarnessTurn
from hitrate.harness.repair import RepeatedFailures, call_failed, repair_text
from hitrate.harness.text_protocol import format_error_text, parse_reply, shell_blocks
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock
from hitrate.tools.base import ToolResult

if TYPE_CHECKING:
    from hitrate.harness.session import Session

ENDED = "the model ended its turn"
EMPTY = "the model sent an empty reply"
SUBMITTED = "the model submitted its work"
TEXT_PROTOCOL_HINT = "--tool-protocol text"


def reply_text(assistant: AssistantMessage | None) -> str:
    """The text of a reply (its text blocks, joined)."""
    if assistant is None:
        return ""
    return "".join(b.text for b in assistant.content if isinstance(b, TextBlock))


class HarnessTurns:
    """The harness's side of one run's turns (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.counts: Counter[str] = Counter()
        self._repaired = False
        """The last turn the harness added was a repair, and no call has come since."""
        self._format_errored = False
        self._failures = RepeatedFailures()

    @property
    def _tool_names(self) -> list[str]:
        return list(self.session.inputs.tools.names)

    def _add(self, step: int, kind: str, reason: str, text: str) -> None:
        self.session.add_harness_turn(step, kind, reason, text)  # type: ignore[arg-type]
        self.counts[kind] += 1

    def no_call(self, step: int, assistant: AssistantMessage | None, *, repairing: bool = True) -> str | None:
        """A native-protocol reply without a call: None after adding a repair turn (the run goes
        on), else why the run ends."""
        shape = call_shape(reply_text(assistant), self._tool_names) if repairing else None
        if shape is not None and not self._repaired:
            self._add(step, "repair", shape.describe(), repair_text(shape, self._tool_names))
            self._repaired = True
            return None
        if assistant is None:
            return EMPTY
        if shape is not None:
            return (f"the repair turn did not produce a call (the reply again contains {shape.describe()}); "
                    f"a model that writes its calls as text does better with {TEXT_PROTOCOL_HINT}")
        return f"{ENDED} (after a repair turn)" if self._repaired else ENDED

    def called(self) -> None:
        """The model made a call: a later call-shaped reply gets a repair turn of its own."""
        self._repaired = False

    def follow_up(self, step: int) -> Callable[[ToolCallBlock, ToolResult], str | None]:
        """What `run_tools` asks after each call: a nudge when the same call failed the same way
        again (`harness.repair.RepeatedFailures`), announced and counted."""

        def check(call: ToolCallBlock, outcome: ToolResult) -> str | None:
            failed = call_failed(outcome.is_error, outcome.metadata)
            note = self._failures.observe(call.name, call.arguments, outcome.content, failed)
            if note is not None:
                self.counts["nudge"] += 1
                self.session.emit(HarnessTurn(session_id=self.session.id, step=step, kind="nudge",
                                              reason=f"the same failing `{call.name}` call repeated", text=note))
            return note

        return check

    def text_reply(
        self, step: int, assistant: AssistantMessage | None, cancel: threading.Event | None, *, cut_off: bool = False,
    ) -> str | None:
        """A reply under the text protocol: run its command (None: the run goes on), answer a
        malformed reply with a format-error turn (None), or say why the run ends. A reply cut off
        at the output limit still runs its block when the block closed before the cut."""
        action = parse_reply(reply_text(assistant), self._tool_names)
        if cut_off and action.kind == "format_error":
            # Say what was really wrong: a small model often writes several blocks and runs into the limit.
            blocks = len(shell_blocks(reply_text(assistant)))
            problem = ("your reply was cut off at the output token limit before one complete ```bash block"
                       if blocks == 0 else
                       f"your reply has {blocks} ```bash blocks and was cut off at the output token limit; send exactly one")
            action = action.model_copy(update={"problem": f"{problem}; keep replies short"})
        if action.kind == "finish":
            return SUBMITTED
        if action.kind == "format_error":
            if self._format_errored:
                return f"{ENDED} ({action.problem}, again after a format-error turn)"
            self._add(step, "format_error", action.problem, format_error_text(action.problem))
            self._format_errored = True
            return None
        self._format_errored = False
        self.session.run_text_command(step, action.command, cancel, follow_up=self.follow_up(step))
        return None
