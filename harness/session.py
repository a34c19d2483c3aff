"""One agent session: the append-only transcript, its projection, and the ledger row of every call.

A step is: project the transcript into a Prompt -> call the backend (with retries) -> write the
ledger row (section hashes, usage buckets, raw usage, price snapshot, cost, timings, and the miss
reason from `projection.explain_miss`) -> freeze the sent dynamic context into history -> append
the assistant turn the policy chooses. Tools run between steps and their results form the next
user turn. A failed or interrupted call is recorded too, with its error, before the exception
goes on, so nothing already spent is lost from the ledger.

Every transcript entry is stored in the ledger as it is added (`transcript_log`), so a session can
be continued later, in another process, with `Session.resume`: same id (so the same OpenAI routing
key), same transcript, epochs and totals, and the first call explained against the last one.

Cancelling (the cancel event passed to `call` / `run_tools`) takes effect at once: a model call is
waited for in a way that can be given up (`interruptible`), and a running shell command polls the
same event.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from hitrate.harness.dynamic_context import workspace_context
from hitrate.harness.events import (
    AssistantTurn,
    CallRetrying,
    CallStarted,
    EpochStarted,
    EventSink,
    HarnessTurn,
    HarnessTurnKind,
    TextDelta,
    discard,
)
from hitrate.harness.epochs import SessionEpochs
from hitrate.harness.interruptible import Cancelled, GuardedCall, cancellable_sleep
from hitrate.harness.keepalive_call import KEEPALIVE_KIND, send_warmup
from hitrate.harness.policy import Policy
from hitrate.harness.price_source import configured_price_table
from hitrate.harness.resume import (
    INTERRUPTED_TOOL_RESULT,
    PreviousRequest,
    SessionNotResumable,
    explain_against,
    interrupted_tool_results,
    session_cache,
    load_session,
    previous_request,
    spec_labels,
    stored_switches,
)
from hitrate.harness.retry import Sleep, call_with_retries
from hitrate.harness.router import Route
from hitrate.harness.session_head import SessionHeadRecording, StoredHead, frozen_inputs, frozen_notice, head_changes, head_of_inputs
from hitrate.harness.session_inputs import SessionConfig, SessionInputs, session_inputs
from hitrate.harness.session_tools import SessionTools
from hitrate.harness.session_clearing import SessionClearing
from hitrate.harness.session_native import SessionNative
from hitrate.harness.session_compaction import SessionCompaction, prompt_too_long
from hitrate.harness.session_record import Answered, SessionRecording
from hitrate.harness.session_turns import SessionTurns, effort_miss
from hitrate.harness.text_protocol import ToolProtocol
from hitrate.harness.summary import EpochLine, SessionSummary, summarize
from hitrate.harness.transcript_log import TranscriptLog
from hitrate.harness.wire.effort import Effort
from hitrate.harness.wire.timeouts import CallBudget
from hitrate.harness.wire.types import CallError, CallResult
from hitrate.projection.caching import CacheRules
from hitrate.projection.caching.family import CacheState
from hitrate.projection.explain import MissExplanation
from hitrate.projection.project import Projector
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import AssistantMessage, TextBlock, Transcript, UserMessage
from hitrate.store.ledger import Ledger, LedgerWriteError
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord, utc_now
from hitrate.tools.base import ApprovalHook, ToolContext

__all__ = ["Cancelled", "INTERRUPTED_TOOL_RESULT", "NO_REPLY_NOTE", "Session", "SessionConfig", "SessionInputs", "StepOutcome", "session_inputs"]

NO_REPLY_NOTE = "(no reply)"
"""The assistant turn standing for a reply that never came, when the next user turn follows."""

Clock = Callable[[], datetime]


@dataclass
class StepOutcome:
    result: CallResult
    prompt: Prompt
    record: CallRecord
    explanation: MissExplanation
    assistant: AssistantMessage | None


class Session(
    SessionRecording, SessionCompaction, SessionClearing, SessionNative, SessionTurns, SessionHeadRecording, SessionTools
):
    """Holds a conversation with one (switchable) backend and records every call."""

    def __init__(
        self,
        route: Route,
        workspace: str | Path,
        *,
        ledger: Ledger,
        inputs: SessionInputs | None = None,
        config: SessionConfig | None = None,
        sink: EventSink = discard,
        context: Callable[[], dict[str, str]] | None = None,
        price_table: PriceTable | None = None,
        sleep: Sleep | None = None,
        session_id: str | None = None,
        approve: ApprovalHook | None = None,
        clock: Clock = utc_now,
    ) -> None:
        """A new session, recorded in `ledger`. `sleep` waits between retries (default: a wait
        that cancelling ends); `approve` is asked before a tool changes anything; `clock` gives
        each call's start time (UTC), from which cache lifetimes count."""
        self._setup(route, workspace, ledger, inputs, config, sink, context, price_table, sleep, approve, clock)
        record = ledger.start_session(
            self.config.run_id,
            self.config.task_id,
            backend=route.backend_name,
            model=route.model,
            label=self.config.label,
            session_id=session_id,
            workspace=str(self.workspace),
            model_spec=route.label,
        )
        self._start(record.id, Transcript(), TranscriptLog(ledger, record.id))
        if self.effort is not None:
            self._log.effort(self.effort, "session start")

    @classmethod
    def resume(
        cls,
        ledger: Ledger,
        session_id: str,
        route: Route,
        workspace: str | Path | None = None,
        *,
        inputs: SessionInputs | None = None,
        config: SessionConfig | None = None,
        sink: EventSink = discard,
        context: Callable[[], dict[str, str]] | None = None,
        price_table: PriceTable | None = None,
        sleep: Sleep | None = None,
        approve: ApprovalHook | None = None,
        clock: Clock = utc_now,
        refresh_head: bool = False,
    ) -> "Session":
        """Continue session `session_id` from its ledger rows: transcript, totals, epochs and the
        last request (see `hitrate.harness.resume`). `workspace` None: where the session worked.
        The session keeps its id, run, task and label; `config` gives the rest. Raises
        `SessionNotResumable` (a KeyError) when the ledger has no such session or no transcript
        of it, `StoredTranscriptError` (a ValueError) when the stored one cannot be read.

        Without `inputs`, requests are built from the head the session recorded (tool specs,
        system prompt, project docs: `session_head`), byte for byte, whatever changed on disk
        since; `head_notice` then says what changed. `refresh_head` uses the current files
        instead: a new epoch, as a model switch is."""
        stored = load_session(ledger, session_id)
        record = stored.record
        if workspace is None:
            if record.workspace is None:
                raise SessionNotResumable(f"session {session_id} did not record its workspace: name the workspace to resume it in")
            workspace = record.workspace
        config = (config or SessionConfig()).model_copy(
            update={"run_id": record.run_id, "task_id": record.task_id, "label": record.label}
        )
        recorded = StoredHead.model_validate_json(stored.stored.head_json) if stored.stored.head_json else None
        changes: list[str] = []
        if inputs is None and recorded is not None:
            protocol = config.tool_protocol or route.spec.quirks.tool_protocol
            current = session_inputs(Path(workspace).resolve(), protocol=protocol)
            changes = head_changes(recorded, head_of_inputs(current), [d.path for d in current.docs])  # type: ignore[union-attr]
            inputs = current if refresh_head else frozen_inputs(recorded, current.tools)
        session = cls.__new__(cls)
        session._setup(route, workspace, ledger, inputs, config, sink, context, price_table, sleep, approve, clock)
        session._start(record.id, stored.stored.transcript, TranscriptLog(ledger, record.id, stored.stored.next_seq))
        session._logged_head = recorded
        if config.tool_protocol is None and recorded is not None and not recorded.tools and not refresh_head:
            # A head without tools is a text-protocol session's: it goes on in the text protocol.
            session.tool_protocol = "text"
        if changes and not refresh_head:
            session.head_notice = frozen_notice(changes)
        elif changes:
            session._epoch_reason = f"refreshed on resume: {' and '.join(changes)}"
        session.records = list(enumerate(stored.calls, start=1))
        stored_effort = stored.stored.effort
        session._epochs = SessionEpochs.restored(
            stored.calls, spec_labels([record.model_spec, *stored.stored.model_specs]), stored_switches(stored.stored),
            effort=stored_effort,
        )
        if config.effort is None:
            # No effort asked for: the session goes on with the one it had.
            session.effort = stored_effort  # type: ignore[assignment]
            route.backend.effort = session.effort
        elif config.effort != stored_effort:
            session._log.effort(config.effort, "resumed")
            session._epoch_reason = f"resumed with effort {config.effort} (was {stored_effort or 'default'})"
        last_ok = next((c for c in reversed(stored.calls) if c.error is None), None)
        if last_ok is not None:
            inputs_ = session.inputs
            session._previous = previous_request(
                session.transcript, last_ok, rules=route.rules, session_id=session.id,
                tools=inputs_.tool_specs, system=inputs_.system, docs=inputs_.docs,
            )
        last_spec = stored.stored.model_spec or record.model_spec
        if last_spec is not None and last_spec != route.label:
            reason = f"resumed on {route.label} (was {last_spec})"
            session._log.model(route.label, reason)
            session._epoch_reason = reason
        return session

    def _setup(
        self,
        route: Route,
        workspace: str | Path,
        ledger: Ledger,
        inputs: SessionInputs | None,
        config: SessionConfig | None,
        sink: EventSink,
        context: Callable[[], dict[str, str]] | None,
        price_table: PriceTable | None,
        sleep: Sleep | None,
        approve: ApprovalHook | None,
        clock: Clock,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise FileNotFoundError(f"workspace {self.workspace} is not a directory")
        self.route = route
        self.ledger = ledger
        self.config = config or SessionConfig()
        self.tool_protocol: ToolProtocol = self.config.tool_protocol or route.spec.quirks.tool_protocol
        """How tools reach the model: native function calling, or text (`harness.text_protocol`)."""
        self.inputs = inputs or session_inputs(self.workspace, protocol=self.tool_protocol)
        self.sink = sink
        # Without a table given, the configured price source ($HITRATE_PRICES, the config file's
        # `prices`), else the shipped snapshot: evals and the TUI price calls as `run` does.
        self.price_table = price_table or configured_price_table()
        self.sleep = sleep
        self.clock = clock
        self._context = context or (lambda: workspace_context(self.workspace))
        self.tool_context = ToolContext(workspace=self.workspace, approve=approve)
        self.effort: Effort | None = self.config.effort
        """The reasoning effort every call asks for; `set_effort` changes it (a new epoch)."""
        route.backend.effort = self.effort

    def _start(self, session_id: str, transcript: Transcript, log: TranscriptLog) -> None:
        self.id = session_id
        self.projector = Projector(self.route.rules, session_id=self.id)
        self.transcript = transcript
        self._log = log
        self.records: list[tuple[int, CallRecord]] = []
        self._epochs = SessionEpochs()
        self.extra_context: dict[str, str] = {}
        """Entries the agent adds to the dynamic context (e.g. the budget left)."""
        self._previous: PreviousRequest | None = None
        """The last request that returned, to explain the next one's misses."""
        self._rewrite: tuple[str, str] | None = None
        """(reason, detail) when the session rewrote its history on purpose since the last call
        (compacted, cleared): the next call's miss is labelled with it."""
        self._cache: tuple[CacheRules, CacheState] | None = None
        """The backend's cache as its family's rules see it, stepped with every request that returned."""
        self._epoch_reason: str | None = None
        self._logged_head: StoredHead | None = None
        """The head last stored in the ledger (what a resume rebuilds requests from)."""
        self.head_notice: str | None = None
        """Set on a resumed session that keeps a recorded head the files on disk no longer match."""

    # ------------------------------------------------------------------ state

    @property
    def spent_usd(self) -> float:
        """Cost of the recorded calls that have a price (unpriced calls count as 0)."""
        return sum(r.cost_usd or 0.0 for _, r in self.records)

    @property
    def epochs(self) -> list[EpochLine]:
        """The session's epochs so far (across resumes)."""
        return self._epochs.lines

    @property
    def epoch_of_call(self) -> dict[str, int]:
        """The session-wide epoch number of each recorded call, by call id."""
        return self._epochs.by_call

    @property
    def approve(self) -> ApprovalHook | None:
        """Asked before a tool changes anything (shell commands, file writes and edits)."""
        return self.tool_context.approve

    @approve.setter
    def approve(self, hook: ApprovalHook | None) -> None:
        self.tool_context = dataclasses.replace(self.tool_context, approve=hook)

    @property
    def last_request(self) -> PreviousRequest | None:
        """The last request that returned, with the start of the last call that sent it (a
        keep-alive warm-up of it included): what the next request's cache outcome depends on."""
        return self._previous

    def emit(self, event: Any) -> None:
        self.sink(event)

    def _append(self, message: UserMessage | AssistantMessage) -> None:
        """Add a message to the transcript and store it in the ledger."""
        transcript = self.transcript.append(message)  # checks the conversation rules first
        try:
            self._log.message(message)
        except LedgerWriteError as exc:
            if exc.spooled_to is not None:
                self.transcript = transcript  # kept in the ledger's spool: the entry is not lost
            raise
        self.transcript = transcript

    def add_user_message(self, text: str) -> None:
        """Add the user's text as the next turn.

        If the transcript ends with a user turn (the last reply never came: an empty answer, or a
        stop nobody closed), that turn is closed first with a placeholder assistant turn, so roles
        keep alternating and nothing already stored changes."""
        if not text.strip():
            raise ValueError("a user message needs some text")
        self.close_open_turn(NO_REPLY_NOTE)
        # Tool calls a killed process left unanswered are answered as interrupted, in this same turn.
        self._append(UserMessage(content=(*interrupted_tool_results(self.transcript), TextBlock(text=text))))

    def add_harness_turn(self, step: int, kind: HarnessTurnKind, reason: str, text: str) -> None:
        """Append a turn the harness writes after the model's reply (a repair or format-error turn:
        `harness.repair`, `harness.text_protocol`) and announce it. It follows all that was sent,
        so the cached prefix is untouched; it is stored like any user turn. After an empty reply
        the turn is first closed with a placeholder, so roles keep alternating."""
        self.close_open_turn(NO_REPLY_NOTE)
        self._append(UserMessage(content=(TextBlock(text=text),)))
        self.emit(HarnessTurn(session_id=self.id, step=step, kind=kind, reason=reason, text=text))

    def close_open_turn(self, note: str) -> bool:
        """End a turn that stopped before the model answered (it was cancelled, failed, or a limit
        stopped it after a tool round) with `note` as the assistant's turn, appended after all
        that was sent, so the next user turn can follow. Returns whether there was one to close."""
        messages = self.transcript.messages
        if not messages or not isinstance(messages[-1], UserMessage):
            return False
        self._append(AssistantMessage(content=(TextBlock(text=note),)))
        return True

    def switch_model(self, route: Route, reason: str = "model switched by the user") -> None:
        """Talk to another backend from the next call on. The next prompt starts a new epoch (caches
        are per model); its first call's miss is recorded against it."""
        if route is self.route:
            return
        self.route.close()
        self.route = route
        route.backend.effort = self.effort
        self._epoch_reason = reason
        self._log.model(route.label, reason)

    def close(self) -> None:
        self.route.close()

    def summary(self, *, status: str = "", steps: int = 0) -> SessionSummary:
        return summarize(self.id, self.route.label, self.records, self.epochs, status=status, steps=steps)

    # ------------------------------------------------------------------ one model call

    def _project(self) -> Prompt:
        # Context goes only onto a newest user turn: a paused turn goes back with none.
        context = None if self.continuing else {**self._context(), **self.extra_context}
        return self.projector.project(
            model=self.route.model,
            tools=self.inputs.tool_specs,
            system=self.inputs.system,
            transcript=self.transcript,
            docs=self.inputs.docs,
            context=context,
            rules=self.route.rules,
            epoch_reason=self._epoch_reason,
            effort=self.effort,
        )

    def call(
        self, step: int, policy: Policy, cancel: threading.Event | None = None, *, time_left_s: float | None = None,
        _overflowed: bool = False,
    ) -> StepOutcome:
        """Project, call with retries, record, then append the turn `policy` chooses. With
        `cancel`, setting it stops the call at once (`Cancelled` is raised, the call recorded).
        With `time_left_s` (what is left of the run's wall time), neither the call nor its retries
        go past it (a CallError with `out_of_time` then says so).
        A prompt near the model's window is compacted first (`session_compaction`); one the
        provider refuses as too long is compacted and sent once more."""
        reason = self._epoch_reason
        self._arm_native_compaction()
        prompt = self._project()
        if self._clear_if_it_pays(prompt):
            prompt = self._project()
        if self._needs_compaction(prompt) and self.compact(cancel) is not None:
            prompt = self._project()
        self._epoch_reason = None
        route = self.route
        epoch = self._epochs.view(prompt, reason, self.effort)
        if epoch.started:
            # Epochs count calls across the whole session (as a resumed session reads them back).
            self._epochs.start(epoch, route.label, len(self.records) + 1)
            self.emit(EpochStarted(session_id=self.id, number=epoch.number, reason=epoch.reason,
                                   changes=epoch.changes, model=route.label))
        self.emit(CallStarted(session_id=self.id, step=step, model=route.label, prompt_tokens_estimate=prompt.total_tokens))
        guard = GuardedCall(
            route.backend, cancel, lambda text: self.emit(TextDelta(session_id=self.id, step=step, text=text)),
            name=f"hitrate-call-{step}",
        )

        def on_retry(error: CallError, attempt: int, delay: float) -> None:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled while waiting to retry")
            self.emit(CallRetrying(session_id=self.id, step=step, attempt=attempt, delay_s=delay, error=str(error)))

        attempts: list[CallRecord] = []  # each attempt is a row; retries name the first
        deadline = time.monotonic() + time_left_s if time_left_s is not None else None
        budget = CallBudget(self.config.timeouts, deadline)

        def send() -> CallResult:
            return guard.attempt(lambda on_text: budget.run(
                lambda: route.backend.call(prompt, max_tokens=self.max_output_tokens, on_text=on_text)
            ))

        def attempt(_number: int) -> Answered:  # the number is len(attempts) + 1
            return self._attempt(step, prompt, epoch, send, attempts=attempts)

        try:
            answered = call_with_retries(
                attempt,
                self.config.retry,
                sleep=self.sleep if self.sleep is not None else cancellable_sleep(cancel),
                on_retry=on_retry,
                deadline=deadline,
            )
        except CallError as error:
            if prompt_too_long(error) and not _overflowed and self.compacts_automatically and self.compact(cancel) is not None:
                left = deadline - time.monotonic() if deadline is not None else None
                return self.call(step, policy, cancel, time_left_s=left, _overflowed=True)
            raise
        except KeyboardInterrupt as exc:
            raise Cancelled(str(exc) or "cancelled") from exc
        result, started_at = answered.result, answered.started_at
        explanation = effort_miss(self._explain(prompt, result, started_at), epoch)
        record = self._record(step, prompt, result, started_at, explanation, epoch, pending=answered.pending)
        # Only a head the provider accepted is one a resume may rebuild (a refused refresh is not).
        self._record_head(prompt)
        if prompt.tail is not None:
            self._log.context(prompt.tail)
        self.transcript = self.transcript.freeze_context(prompt.tail)
        self._previous = PreviousRequest(prompt=prompt, started_at=started_at)
        turn = policy.decide(step, result)
        assistant = self._add_reply(turn) if turn is not None else None
        self._fold_native_compaction(assistant)
        if turn is not None:
            self.emit(
                AssistantTurn(
                    session_id=self.id,
                    step=step,
                    text="".join(b.text for b in turn.content if isinstance(b, TextBlock)),
                    tool_calls=[c.name for c in turn.tool_calls],
                    replayed=policy.replays,
                )
            )
        return StepOutcome(result=result, prompt=prompt, record=record, explanation=explanation, assistant=assistant)

    def warm_up(self, cancel: threading.Event | None = None) -> CallRecord:
        """Send the last request again, byte for byte, with the smallest output the provider allows,
        so its cached prefix lives another TTL (see `hitrate.harness.keepalive`). The call is
        recorded with kind "keepalive" and announced with step 0; the transcript does not change.
        No retries: a failed warm-up is recorded and raised (CallError, or Cancelled once `cancel`
        is set). ValueError when there is nothing that can be warmed."""
        previous = self._previous
        if previous is None:
            raise ValueError("nothing to warm: no request has returned in this session yet")
        if previous.unknown_from is not None:
            raise ValueError("the cached prefix's bytes are not known since the resume, so they cannot be re-sent")
        prompt, route = previous.prompt, self.route
        if prompt.model != route.model or self._epoch_reason is not None:
            raise ValueError("the model changed since the last request: its cached prefix cannot help the next one")
        record, _, started_at = self._side_call(
            prompt, cancel, lambda: send_warmup(route.backend, prompt), name="hitrate-keepalive", kind=KEEPALIVE_KIND
        )
        # A read refreshes the entry from this request's start: the next request is explained
        # against the warm-up, not against the request it repeated.
        self._previous = PreviousRequest(prompt=prompt, started_at=started_at)
        return record

    def _explain(self, prompt: Prompt, result: CallResult, started_at: datetime) -> MissExplanation:
        rules = self.route.explain_rules
        if self._cache is None or self._cache[0] != rules:
            self._cache = (rules, session_cache(rules, self._previous))
        explanation = explain_against(
            self._previous, prompt, started_at=started_at, rules=rules, usage=result.usage, cache=self._cache[1]
        )
        if self._rewrite is not None and prompt.messages != self._previous_messages():
            # The history was rewritten on purpose (compacted, cleared): say so, with what it cost.
            (reason, detail), self._rewrite = self._rewrite, None
            if explanation.reason == "prefix_changed":
                explanation = explanation.model_copy(update={"reason": reason, "label": reason, "detail": detail})
        return explanation

    def _previous_messages(self) -> tuple:
        return self._previous.prompt.messages if self._previous is not None else ()
