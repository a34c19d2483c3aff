"""One agent session: the append-only transcript, its projection, and the ledger row of every call.

A step is: project the transcript into a Prompt -> call the backend (with retries) -> write the
ledger row (section hashes, usage buckets, raw usage, price snapshot, cost, timings, and the miss
reason from `projection.explain_miss`) -> freeze the sent dynamic context into history -> append
the assistant turn the policy chooses. Tools run between steps and their results form the next
user turn. A failed or interrupted call is recorded too, with its error, before the exception
goes on, so nothing already spent is lost from the ledger.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from hitrate.harness.call_sections import call_sections
from hitrate.harness.dynamic_context import workspace_context
from hitrate.harness.events import (
    AssistantTurn,
    CallRecorded,
    CallRetrying,
    CallStarted,
    EpochStarted,
    EventSink,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    discard,
)
from hitrate.harness.policy import Policy
from hitrate.harness.prompts import default_system_prompt
from hitrate.harness.retry import RetryPolicy, Sleep, call_with_retries
from hitrate.harness.router import Route
from hitrate.harness.summary import EpochLine, SessionSummary, summarize
from hitrate.harness.wire_types import CallError, CallResult
from hitrate.projection.docs import ProjectDoc, discover_docs
from hitrate.projection.explain import MissExplanation, explain_miss
from hitrate.projection.project import Projector, SystemPrompt
from hitrate.projection.prompt import Prompt
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolResultBlock, Transcript, UserMessage
from hitrate.store.cost import CostBreakdown, cost
from hitrate.store.ledger import Ledger
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord, utc_now
from hitrate.store.usage import WRITE_BUCKETS, Usage
from hitrate.tools.base import ToolContext
from hitrate.tools.registry import ToolRegistry, default_tools


class Cancelled(Exception):
    """The user stopped the session (cancel event or Ctrl-C)."""


class SessionConfig(BaseModel):
    """Settings of one session."""

    model_config = ConfigDict(frozen=True)

    max_output_tokens: int = Field(default=4096, ge=1)
    """`max_tokens` of every call."""
    retry: RetryPolicy = RetryPolicy()
    run_id: str | None = None
    task_id: str | None = None
    label: str | None = None
    """Shown in `hitrate ledger` next to the session id."""
    layout: str | None = None
    """Ledger tag for evals ("cache_aware", "naive")."""
    cache_mode: str | None = None
    """Ledger tag for evals ("cold", "warm")."""


@dataclass
class SessionInputs:
    """What the head of every request is built from, fixed for the session."""

    tools: ToolRegistry
    tool_specs: list[ToolSpec]
    system: SystemPrompt | str
    docs: list[ProjectDoc]


def session_inputs(workspace: Path, tools: ToolRegistry | None = None, system: SystemPrompt | str | None = None) -> SessionInputs:
    """Tools (default set), their specs, the system prompt and the workspace's project docs (read once)."""
    registry = tools if tools is not None else default_tools()
    specs = [ToolSpec(name=s["name"], description=s["description"], input_schema=s["input_schema"]) for s in registry.schemas()]
    return SessionInputs(
        tools=registry,
        tool_specs=specs,
        system=system if system is not None else default_system_prompt(registry.names),
        docs=discover_docs(workspace),
    )


@dataclass
class StepOutcome:
    result: CallResult
    prompt: Prompt
    record: CallRecord
    explanation: MissExplanation
    assistant: AssistantMessage | None


def _miss_cost(explanation: MissExplanation, usage: Usage, breakdown: CostBreakdown) -> float | None:
    """What the unread tokens cost beyond a cache read: they were paid as writes or fresh input."""
    rates = breakdown.rates
    if not explanation.tokens_missed:
        return 0.0 if rates is not None else None
    if rates is None:
        return None
    written = {b: getattr(usage, b) or 0 for b in WRITE_BUCKETS}
    largest = max(written, key=lambda b: written[b])
    write_rate = rates.rate_for(largest)
    paid = write_rate if written[largest] > 0 and write_rate is not None else rates.input
    read = rates.read if rates.read is not None else rates.input
    return explanation.tokens_missed * max(0.0, paid - read) / 1_000_000


class Session:
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
        sleep: Sleep = time.sleep,
        session_id: str | None = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise FileNotFoundError(f"workspace {self.workspace} is not a directory")
        self.route = route
        self.ledger = ledger
        self.config = config or SessionConfig()
        self.inputs = inputs or session_inputs(self.workspace)
        self.sink = sink
        self.price_table = price_table or PriceTable.default()
        self.sleep = sleep
        self._context = context or (lambda: workspace_context(self.workspace))
        record = ledger.start_session(
            self.config.run_id,
            self.config.task_id,
            backend=route.backend_name,
            model=route.model,
            label=self.config.label,
            session_id=session_id,
        )
        self.id = record.id
        self.projector = Projector(route.rules, session_id=self.id)
        self.transcript = Transcript()
        self.tool_context = ToolContext(workspace=self.workspace)
        self.records: list[tuple[int, CallRecord]] = []
        self.epochs: list[EpochLine] = []
        self.extra_context: dict[str, str] = {}
        """Entries the agent adds to the dynamic context (e.g. the budget left)."""
        self._previous: tuple[Prompt, float] | None = None
        """The last successful request and when it was sent (wall clock), to explain the next one's misses."""
        self._epoch_reason: str | None = None

    # ------------------------------------------------------------------ state

    @property
    def spent_usd(self) -> float:
        """Cost of the recorded calls that have a price (unpriced calls count as 0)."""
        return sum(r.cost_usd or 0.0 for _, r in self.records)

    def emit(self, event: Any) -> None:
        self.sink(event)

    def add_user_message(self, text: str) -> None:
        """Add the user's text as the next turn.

        After a stop between a tool round and the next call, the transcript already ends with an
        unsent user turn (the tool results): the text joins that turn, which has not been sent yet,
        so no sent byte changes. If the last user turn was sent but got no reply (an empty answer),
        a placeholder assistant turn keeps the roles alternating.
        """
        if not text.strip():
            raise ValueError("a user message needs some text")
        block = TextBlock(text=text)
        messages = self.transcript.messages
        last = messages[-1] if messages else None
        if isinstance(last, UserMessage):
            sent = len(self._previous[0].messages) if self._previous is not None else 0
            if len(messages) > sent and not last.context_blocks:
                joined = UserMessage(content=last.content + (block,))
                self.transcript = Transcript(messages=messages[:-1] + (joined,))
                return
            self.transcript = self.transcript.append(AssistantMessage(content=(TextBlock(text="(no reply)"),)))
        self.transcript = self.transcript.append(UserMessage(content=(block,)))

    def switch_model(self, route: Route, reason: str = "model switched by the user") -> None:
        """Talk to another backend from the next call on. The next prompt starts a new epoch (caches
        are per model); its first call's miss is recorded against it."""
        if route is self.route:
            return
        self.route.close()
        self.route = route
        self._epoch_reason = reason

    def close(self) -> None:
        self.route.close()

    def summary(self, *, status: str = "", steps: int = 0) -> SessionSummary:
        return summarize(self.id, self.route.label, self.records, self.epochs, status=status, steps=steps)

    # ------------------------------------------------------------------ one model call

    def _project(self) -> Prompt:
        context = {**self._context(), **self.extra_context}
        prompt = self.projector.project(
            model=self.route.model,
            tools=self.inputs.tool_specs,
            system=self.inputs.system,
            transcript=self.transcript,
            docs=self.inputs.docs,
            context=context,
            rules=self.route.rules,
            epoch_reason=self._epoch_reason,
        )
        self._epoch_reason = None
        return prompt

    def call(self, step: int, policy: Policy, cancel: threading.Event | None = None) -> StepOutcome:
        """Project, call with retries, record, then append the turn `policy` chooses."""
        prompt = self._project()
        route = self.route
        if prompt.epoch_started:
            epoch = prompt.epoch
            self.epochs.append(EpochLine(number=epoch.number, reason=epoch.reason, model=route.label, first_step=step))
            self.emit(EpochStarted(session_id=self.id, number=epoch.number, reason=epoch.reason,
                                   changes=list(epoch.changes), model=route.label))
        self.emit(CallStarted(session_id=self.id, step=step, model=route.label, prompt_tokens_estimate=prompt.total_tokens))

        def on_text(text: str) -> None:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled while the model was answering")
            self.emit(TextDelta(session_id=self.id, step=step, text=text))

        def on_retry(error: CallError, attempt: int, delay: float) -> None:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled while waiting to retry")
            self.emit(CallRetrying(session_id=self.id, step=step, attempt=attempt, delay_s=delay, error=str(error)))

        started_at = utc_now()
        wall_start = time.time()
        clock_start = time.monotonic()
        try:
            result = call_with_retries(
                lambda attempt: route.backend.call(prompt, max_tokens=self.config.max_output_tokens, on_text=on_text),
                self.config.retry,
                sleep=self.sleep,
                on_retry=on_retry,
            )
        except CallError as error:
            suffix = f" (after {error.attempts} attempt{'s' if error.attempts != 1 else ''})"
            self._record_failure(step, prompt, started_at, clock_start, str(error) + suffix, error.partial_usage)
            raise
        except (Cancelled, KeyboardInterrupt) as exc:
            self._record_failure(step, prompt, started_at, clock_start, f"cancelled: {exc}" if str(exc) else "cancelled", None)
            raise Cancelled(str(exc) or "cancelled") from exc

        explanation = self._explain(prompt, result, wall_start)
        record = self._record(step, prompt, result, started_at, explanation)
        self.transcript = self.transcript.freeze_context(prompt.tail)
        self._previous = (prompt, wall_start)
        assistant = policy.decide(step, result)
        if assistant is not None:
            self.transcript = self.transcript.append(assistant)
            self.emit(
                AssistantTurn(
                    session_id=self.id,
                    step=step,
                    text="".join(b.text for b in assistant.content if isinstance(b, TextBlock)),
                    tool_calls=[c.name for c in assistant.tool_calls],
                    replayed=policy.replays,
                )
            )
        return StepOutcome(result=result, prompt=prompt, record=record, explanation=explanation, assistant=assistant)

    def _explain(self, prompt: Prompt, result: CallResult, wall_start: float) -> MissExplanation:
        previous, sent_at = self._previous if self._previous is not None else (None, wall_start)
        return explain_miss(
            previous,
            prompt,
            seconds_since_previous=wall_start - sent_at,
            previous_model=previous.model if previous is not None else prompt.model,
            current_model=prompt.model,
            rules=self.route.explain_rules,
            reported_cache_read=result.usage.cache_read,
            reported_prompt_tokens=result.usage.prompt_tokens,
        )

    def _call_record(self, prompt: Prompt, started_at: datetime, **fields: Any) -> CallRecord:
        """A ledger row for a call of `prompt`, with what every row of this session carries."""
        return CallRecord(
            run_id=self.config.run_id,
            task_id=self.config.task_id,
            session_id=self.id,
            backend=self.route.backend_name,
            model=prompt.model,
            started_at=started_at,
            section_hashes=prompt.section_hashes(),
            sections=call_sections(prompt),
            price_snapshot_id=self.price_table.id,
            layout=self.config.layout,
            cache_mode=self.config.cache_mode,
            **fields,
        )

    def _record(
        self, step: int, prompt: Prompt, result: CallResult, started_at: datetime, explanation: MissExplanation
    ) -> CallRecord:
        breakdown = cost(result.usage, prompt.model, started_at, self.price_table)
        missed = explanation.reason != "hit"
        record = self._call_record(
            prompt,
            started_at,
            ttft_s=result.ttft_s,
            latency_s=result.latency_s,
            usage=result.usage,
            raw_usage=result.raw_usage,
            cost_usd=breakdown.total,
            miss_reason=explanation.label if missed else None,
            miss_tokens=explanation.tokens_missed if missed else 0,
            miss_cost_usd=_miss_cost(explanation, result.usage, breakdown) if missed else 0.0,
        )
        record = self._store(step, prompt, record, stop_reason=result.stop_reason)
        if prompt.epoch_started and self.epochs and self.epochs[-1].first_step == step:
            self.epochs[-1] = self.epochs[-1].model_copy(update={"miss_tokens": record.miss_tokens, "miss_cost_usd": record.miss_cost_usd})
        return record

    def _record_failure(
        self, step: int, prompt: Prompt, started_at: datetime, clock_start: float, error: str, partial: dict[str, Any] | None
    ) -> None:
        record = self._call_record(
            prompt,
            started_at,
            latency_s=time.monotonic() - clock_start,
            usage=Usage(),
            raw_usage=partial,
            error=error,
        )
        self._store(step, prompt, record, stop_reason=None)

    def _store(self, step: int, prompt: Prompt, record: CallRecord, *, stop_reason: str | None) -> CallRecord:
        """Write the row (and the price snapshot it names) to the ledger, keep it for the summary,
        and announce it."""
        record = self.ledger.record_call(record, price_table=self.price_table)
        self.records.append((step, record))
        self.emit(
            CallRecorded(
                session_id=self.id,
                step=step,
                call_id=record.id,
                model=self.route.label,
                usage=record.usage,
                cost_usd=record.cost_usd,
                miss_reason=record.miss_reason,
                miss_tokens=record.miss_tokens,
                miss_cost_usd=record.miss_cost_usd,
                ttft_s=record.ttft_s,
                latency_s=record.latency_s,
                stop_reason=stop_reason,
                error=record.error,
                epoch=prompt.epoch.number,
            )
        )
        return record

    # ------------------------------------------------------------------ tools

    def run_tools(self, step: int, assistant: AssistantMessage, cancel: threading.Event | None = None) -> UserMessage:
        """Run the turn's tool calls in order and append their results as the next user turn.

        If the session is cancelled part-way, the calls not yet run are answered with an error
        result, so the transcript stays valid (every call answered) and can be continued.
        """
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
                outcome = self.inputs.tools.execute(call.name, call.arguments, self.tool_context)
            except KeyboardInterrupt as exc:
                interrupted = exc
                results.append(ToolResultBlock(call_id=call.call_id, content="interrupted by the user", is_error=True))
                continue
            results.append(ToolResultBlock(call_id=call.call_id, content=outcome.content, is_error=outcome.is_error))
            self.emit(
                ToolCallFinished(
                    session_id=self.id, step=step, call_id=call.call_id, name=call.name, is_error=outcome.is_error,
                    content=outcome.content, metadata=_jsonable(outcome.metadata),
                )
            )
        message = UserMessage(content=tuple(results))
        self.transcript = self.transcript.append(message)
        if interrupted is not None:
            raise Cancelled("cancelled while tools were running") from interrupted
        return message


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    """Tool metadata for an event: JSON-safe values only (paths and the like as strings)."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, (str, int, float, bool)) or item is None:
            out[key] = item
        elif isinstance(item, (list, tuple)) and all(isinstance(i, (str, int, float, bool)) for i in item):
            out[key] = list(item)
        else:
            out[key] = str(item)
    return out
