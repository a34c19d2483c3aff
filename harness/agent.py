"""The agent loop: project -> call -> record -> run tools -> append -> repeat.

It stops cleanly when the model ends its turn (a reply without tool calls, once a reply that only
looked like a call has had its repair turn: `harness.harness_turns`), when a limit is
reached (steps, dollars, wall time; checked before each call and after each tool round), when a
call fails for good, or when the user cancels (a `threading.Event` or Ctrl-C). Every call made
before the stop is already in the ledger; the result carries the session summary.

A refusal ends the run too, with its own status: the run's turns are taken out of the history, as
providers document (a conversation that goes on from a refused turn keeps being refused). A
paused turn (Anthropic `pause_turn`) is sent back as it is, so the model goes on with it.

A stop other than the model's own end leaves a turn without the model's answer. The agent closes
it with a short assistant note saying why (`closing_note`), recorded in the transcript like any
turn, so the next user prompt can follow it in any interface, and the model reads what happened.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from hitrate.harness.events import Finished, SessionStarted
from hitrate.harness.harness_turns import HarnessTurns
from hitrate.harness.policy import ModelPolicy, Policy
from hitrate.harness.session import NO_REPLY_NOTE, Cancelled, Session
from hitrate.harness.summary import SessionSummary
from hitrate.harness.wire.types import CallError
from hitrate.projection.transcript import AssistantMessage, Message, TextBlock
from hitrate.store.ledger import LedgerWriteError

Status = Literal[
    "end_turn", "max_steps", "max_cost", "max_wall", "max_tokens", "context_full", "refused", "cancelled", "error"
]


class AgentLimits(BaseModel):
    """When to stop even though the model would go on."""

    model_config = ConfigDict(frozen=True)

    max_steps: int = Field(default=50, ge=1)
    """Model calls at most."""
    max_cost_usd: float | None = Field(default=None, ge=0)
    """Stop before a call once the recorded cost reaches this. Calls without a price count as $0."""
    max_wall_s: float | None = Field(default=None, gt=0)
    """Stop once this many seconds have passed since the task started: checked before each call,
    and each call (its retries and their waits included) is cut off at what is left of it."""
    show_budget: bool = True
    """Tell the model, in the dynamic context, how many steps (and dollars) are left."""


INTERRUPTED_NOTE = "[interrupted by the user]"
CUT_OFF_TOOL_RESULT = (
    "not run: your reply was cut off at the output token limit, so this call may be incomplete; "
    "send it again, smaller (e.g. split a large file write into several edits)"
)
FAILED_NOTE = "[the previous step failed before the model answered]"
_LIMIT_NOTE = "[stopped by a limit: {detail}]"


CONTEXT_FULL_TOOL_RESULT = (
    "not run: your reply filled the model's context window, so this call may be incomplete"
)
MAX_PAUSES = 10
"""How many times in a row a paused turn (Anthropic `pause_turn`) is continued before the agent stops."""


def refusal_detail(raw: str | None, details: dict | None) -> str:
    """What the user is told about a refused turn: the provider's word and explanation, and what
    the session did about it."""
    why = raw or "refusal"
    explanation = (details or {}).get("explanation") or (details or {}).get("category")
    if explanation:
        why += f": {explanation}"
    return (f"the model refused ({why}). The refused request was taken out of the history, as the provider "
            "documents (a conversation that goes on from a refused turn keeps being refused): rephrase it")


def closing_note(status: Status, detail: str) -> str:
    """The assistant turn that closes a turn the agent stopped for `status` (not end_turn)."""
    if status == "cancelled":
        return INTERRUPTED_NOTE
    if status.startswith("max_") or status == "context_full":
        return _LIMIT_NOTE.format(detail=detail)
    return FAILED_NOTE


def is_closing_note(message: Message) -> bool:
    """Whether `message` is a turn the harness wrote to close a turn the model never answered
    (`closing_note`, or the session's placeholder for an empty reply), not the model's own."""
    if not isinstance(message, AssistantMessage) or len(message.content) != 1:
        return False
    block = message.content[0]
    if not isinstance(block, TextBlock):
        return False
    prefix, _, suffix = _LIMIT_NOTE.partition("{detail}")
    text = block.text
    return text in (INTERRUPTED_NOTE, FAILED_NOTE, NO_REPLY_NOTE) or (text.startswith(prefix) and text.endswith(suffix))


class AgentResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: Status
    detail: str = ""
    error_kind: str | None = None
    """With status "error": the failed call's `CallError.kind` (auth, client_error, ...)."""
    error_status: int | None = None
    """With status "error": the failed call's HTTP status, when there was a response."""
    steps: int
    summary: SessionSummary
    harness_turns: dict[str, int] = Field(default_factory=dict)
    """Turns the harness added during the run, by kind (repair, nudge, format_error: `HarnessTurn`)."""


class Agent:
    """Runs tasks in a session under limits, emitting events to the session's sink."""

    def __init__(
        self,
        session: Session,
        *,
        policy: Policy | None = None,
        limits: AgentLimits | None = None,
        cancel: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.policy = policy or ModelPolicy()
        self.limits = limits or AgentLimits()
        self.cancel = cancel or threading.Event()
        self.clock = clock

    def _limit_reached(self, steps: int, elapsed: float) -> tuple[Status, str] | None:
        limits = self.limits
        if steps >= limits.max_steps:
            return "max_steps", f"reached the limit of {limits.max_steps} model calls"
        spent = self.session.spent_usd
        if limits.max_cost_usd is not None and spent >= limits.max_cost_usd:
            return "max_cost", f"spent ${spent:.4f} of the ${limits.max_cost_usd:.4f} limit"
        if limits.max_cost_usd is not None:
            # Checking only what was spent lets the last call overshoot by a whole call. The
            # transcript only grows, so the next call costs at least about what the last call that
            # hit the cache did: a call that would cross the limit is not started.
            estimate = self._next_call_estimate()
            if estimate is not None and spent + estimate > limits.max_cost_usd:
                return "max_cost", (f"spent ${spent:.4f}; the next call would cost about ${estimate:.4f} (as the last "
                                    f"cached one did), over the ${limits.max_cost_usd:.4f} limit")  # fmt: skip
        if limits.max_wall_s is not None and elapsed >= limits.max_wall_s:
            return "max_wall", f"{elapsed:.1f}s elapsed, limit {limits.max_wall_s:.1f}s"
        return None

    def _wall_left(self, elapsed: float) -> float | None:
        """Seconds left of the wall-time limit (None without one): what the next call may take."""
        if self.limits.max_wall_s is None:
            return None
        return max(0.0, self.limits.max_wall_s - elapsed)

    def _next_call_estimate(self) -> float | None:
        """What the last priced call that returned without a miss cost; None before any. A miss
        (a cold start, an expired prefix) pays writes the next call will not, so it is no guide."""
        for _, record in reversed(self.session.records):
            if record.error is None and record.cost_usd is not None and not record.miss_reason:
                return record.cost_usd
        return None

    def _budget(self, steps: int) -> None:
        if not self.limits.show_budget:
            return
        left = [f"{self.limits.max_steps - steps} model calls"]
        if self.limits.max_cost_usd is not None:
            left.append(f"${max(0.0, self.limits.max_cost_usd - self.session.spent_usd):.2f}")
        self.session.extra_context["budget left"] = ", ".join(left)

    def _cut_off_detail(self) -> str:
        limit = self.session.max_output_tokens
        return f"the reply was cut off at the output limit of {limit:,} tokens (raise it with --max-output-tokens)"

    def _context_full(self, assistant: AssistantMessage | None) -> str:
        """The reply filled the model's window: answer its tool calls unrun, compact the history
        when it can be, and say which."""
        session = self.session
        if assistant is not None and assistant.tool_calls:
            session.answer_tools_unrun(assistant, CONTEXT_FULL_TOOL_RESULT)
        detail = "the reply filled the model's context window (model_context_window_exceeded)"
        try:
            compacted = session.compact(self.cancel) is not None
        except CallError as exc:  # recorded in the ledger; the history is as it was
            return detail + f"; compacting the history failed ({exc}): lower --max-output-tokens or start a new session"
        if compacted:
            return detail + "; the history was compacted, so the next prompt has room"
        return detail + "; nothing could be compacted: lower --max-output-tokens or start a new session"

    def run(self, task: str) -> AgentResult:
        """Give the model `task` and loop until it is done or a stop condition holds."""
        session = self.session
        session.emit(SessionStarted(session_id=session.id, model=session.route.label, workspace=str(session.workspace), task=task))
        started = self.clock()
        steps = 0
        status: Status = "end_turn"
        detail = ""
        error: CallError | None = None
        cut_offs_in_a_row = 0
        pauses_in_a_row = 0
        turns = HarnessTurns(session)
        try:
            session.add_user_message(task)  # inside: a full disk here is a clear error too
            run_start = len(session.transcript.messages) - 1  # where this run's turns begin: a refusal takes them out
            while True:
                if self.cancel.is_set():
                    status, detail = "cancelled", "cancelled by the user"
                    break
                elapsed = self.clock() - started
                reached = self._limit_reached(steps, elapsed)
                if reached is not None:
                    status, detail = reached
                    break
                steps += 1
                self._budget(steps - 1)
                outcome = session.call(steps, self.policy, self.cancel, time_left_s=self._wall_left(elapsed))
                assistant = outcome.assistant
                # A replayed turn is the script's, whole, whatever happened to the live reply.
                stop = outcome.result.stop_reason if not self.policy.replays else "end_turn"
                cut_off = stop == "max_tokens"
                if stop == "refusal":
                    session.rewind(run_start, "the model refused")
                    status, detail = "refused", refusal_detail(outcome.result.raw_stop_reason, outcome.result.stop_details)
                    break
                if stop == "pause_turn" and assistant is not None:
                    # Anthropic paused a long turn: sending it back as it is lets the model go on.
                    pauses_in_a_row += 1
                    if pauses_in_a_row <= MAX_PAUSES:
                        continue
                    status, detail = "error", f"the model paused its turn {MAX_PAUSES} times in a row"
                    break
                pauses_in_a_row = 0
                if stop == "context_window_exceeded":
                    status, detail = "context_full", self._context_full(assistant)
                    break
                if session.tool_protocol == "text" and not self.policy.replays:
                    ended = turns.text_reply(steps, assistant, self.cancel, cut_off=cut_off)
                    if ended is not None:
                        status, detail = "end_turn", ended
                        break
                    continue
                if assistant is None or not assistant.tool_calls:
                    if cut_off:
                        status, detail = "max_tokens", self._cut_off_detail()
                        break
                    ended = turns.no_call(steps, assistant, repairing=not self.policy.replays)
                    if ended is not None:
                        status, detail = "end_turn", ended
                        break
                    continue
                turns.called()
                if cut_off:
                    # The last tool call's arguments are likely truncated: run none of them, tell
                    # the model why, and let it try once more; a second cut-off in a row stops.
                    session.answer_tools_unrun(assistant, CUT_OFF_TOOL_RESULT)
                    cut_offs_in_a_row += 1
                    if cut_offs_in_a_row >= 2:
                        status, detail = "max_tokens", self._cut_off_detail()
                        break
                    continue
                cut_offs_in_a_row = 0
                session.run_tools(steps, assistant, self.cancel, follow_up=turns.follow_up(steps))
        except (Cancelled, KeyboardInterrupt) as exc:
            status, detail = "cancelled", str(exc) or "cancelled by the user"
        except CallError as exc:
            if exc.out_of_time:
                # The wall-time limit cut the call (or left no time to retry it): a limit, not a fault.
                elapsed = self.clock() - started
                status, detail = "max_wall", f"{elapsed:.1f}s elapsed, limit {self.limits.max_wall_s:.1f}s; the last call: {exc}"
            else:
                status, detail, error = "error", str(exc), exc
        except LedgerWriteError as exc:
            # The ledger file is full: no call may go unrecorded, so the run stops here. What the
            # last call used is in the spool (and in the summary), never lost silently.
            status, detail = "error", str(exc)
        if status != "end_turn":
            try:
                session.close_open_turn(closing_note(status, detail))
            except LedgerWriteError:
                pass  # the disk is full: the note is spooled with the rest, or the run already says why
        summary = session.summary(status=status, steps=steps)
        session.emit(Finished(session_id=session.id, status=status, detail=detail, summary=summary.model_dump(mode="json"),
                              harness_turns=dict(turns.counts)))
        return AgentResult(status=status, detail=detail, steps=steps, summary=summary, harness_turns=dict(turns.counts),
                           error_kind=error.kind if error else None, error_status=error.status if error else None)
