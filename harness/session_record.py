"""The ledger row of each call a session makes: building it, pricing it, explaining a miss, and
storing and announcing it.

A mixin of `Session`, kept apart so the session module stays about the conversation itself; it
relies only on the session attributes declared below."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from hitrate.harness.call_sections import call_sections
from hitrate.harness.epochs import EpochView, SessionEpochs
from hitrate.harness.events import CallRecorded, call_facts
from hitrate.harness.router import Route
from hitrate.harness.session_inputs import SessionConfig
from hitrate.harness.interruptible import Cancelled, GuardedCall
from hitrate.harness.wire.timeouts import CallBudget
from hitrate.harness.wire.types import CallError, CallResult
from hitrate.projection.explain import MissExplanation
from hitrate.projection.prompt import Prompt
from hitrate.store.cost import cost, miss_cost
from hitrate.store.ledger import Ledger, LedgerWriteError
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord
from hitrate.store.usage import Usage


@dataclass(frozen=True)
class Answered:
    """An attempt that returned: its result, its pending row and when its request was sent."""

    result: CallResult
    pending: CallRecord
    started_at: datetime


class SessionRecording:
    """Writes a session's call rows to its ledger and keeps them for its summary."""

    id: str
    route: Route
    config: SessionConfig
    ledger: Ledger
    price_table: PriceTable
    records: list[tuple[int, CallRecord]]
    _epochs: SessionEpochs
    clock: Callable[[], datetime]
    emit: Callable[[Any], None]
    _explain: Callable[..., MissExplanation]

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

    def _attempt(
        self, step: int, prompt: Prompt, epoch: EpochView, send: Callable[[], CallResult], *,
        attempts: list[CallRecord] | None = None, kind: str | None = None,
    ) -> Answered:
        """One attempt of a call: its row written pending, `send()`, and the row completed with the
        error when it fails (a cancel included, raised as `Cancelled`). The caller completes the
        row of an attempt that returned (`_record` with `pending`). `attempts`: the rows of the
        call's earlier attempts, to which this one's is added; a retry names the first of them."""
        started_at = self.clock()
        clock_start = time.monotonic()
        earlier = attempts if attempts is not None else []
        pending = self._begin_attempt(prompt, started_at, attempt=len(earlier) + 1,
                                      retry_of=earlier[0].id if earlier else None, kind=kind)  # fmt: skip
        earlier.append(pending)
        try:
            result = send()
        except CallError as error:
            self._fail_attempt(step, pending, clock_start, str(error), error.partial_usage, epoch)
            raise
        except (Cancelled, KeyboardInterrupt) as exc:
            self._fail_attempt(step, pending, clock_start, f"cancelled: {exc}" if str(exc) else "cancelled", None, epoch)
            raise Cancelled(str(exc) or "cancelled") from exc
        return Answered(result, pending, started_at)

    def _side_call(
        self, prompt: Prompt, cancel: Any, send: Callable[[], CallResult], *, name: str, kind: str,
    ) -> tuple[CallRecord, CallResult, datetime]:
        """A call that is not an agent step (a keep-alive warm-up, a compaction summary): one
        attempt, no retries, bounded by the configured timeouts, cancelled by `cancel`, its row
        written pending first and completed after with `kind`, as step 0 of the current epoch.
        Returns the row, the result and when the request was sent; a failure is recorded and raised."""
        epoch = EpochView(self._epochs.lines[-1].number if self._epochs.lines else 0, False, "", [])
        guard = GuardedCall(self.route.backend, cancel, lambda text: None, name=name)
        budget = CallBudget(self.config.timeouts)
        answered = self._attempt(0, prompt, epoch, lambda: guard.attempt(lambda on_text: budget.run(send)), kind=kind)
        result, started_at = answered.result, answered.started_at
        explanation = self._explain(prompt, result, started_at)
        return self._record(0, prompt, result, started_at, explanation, epoch, pending=answered.pending), result, started_at

    def _begin_attempt(
        self, prompt: Prompt, started_at: datetime, *, attempt: int = 1, retry_of: str | None = None, kind: str | None = None,
    ) -> CallRecord:
        """The pending row of one attempt, written before its request is sent (see `Ledger.begin_call`)."""
        record = self._call_record(prompt, started_at, attempt=attempt, retry_of=retry_of, kind=kind)
        return self.ledger.begin_call(record, price_table=self.price_table)

    def _fail_attempt(
        self, step: int, pending: CallRecord, clock_start: float, error: str, partial: dict[str, Any] | None, epoch: EpochView,
    ) -> CallRecord:
        """Complete a pending row with the attempt's error: no usage known (a failed attempt
        carries none of its own, so totals never count it twice), the partial usage kept raw."""
        record = pending.model_copy(
            update={"latency_s": time.monotonic() - clock_start, "usage": Usage(), "raw_usage": partial, "error": error}
        )
        return self._store(step, record, stop_reason=None, epoch=epoch, pending=True)

    def _record(
        self, step: int, prompt: Prompt, result: CallResult, started_at: datetime, explanation: MissExplanation, epoch: EpochView,
        kind: str | None = None, pending: CallRecord | None = None,
    ) -> CallRecord:
        """The row of a call that returned; with `pending`, it completes that attempt's pending row."""
        breakdown = cost(result.usage, prompt.model, started_at, self.price_table)
        missed = explanation.reason != "hit"
        linked: dict[str, Any] = {}
        if pending is not None:
            linked = {"id": pending.id, "attempt": pending.attempt, "retry_of": pending.retry_of}
            kind = pending.kind
        record = self._call_record(
            prompt,
            started_at,
            **linked,
            ttft_s=result.ttft_s,
            latency_s=result.latency_s,
            usage=result.usage,
            raw_usage=result.raw_usage,
            cost_usd=breakdown.total,
            miss_reason=explanation.label if missed else None,
            miss_tokens=explanation.tokens_missed if missed else 0,
            miss_cost_usd=miss_cost(explanation.tokens_missed, result.usage, breakdown) if missed else 0.0,
            kind=kind,
        )
        return self._store(step, record, stop_reason=result.stop_reason, epoch=epoch, pending=pending is not None)

    def _store(
        self, step: int, record: CallRecord, *, stop_reason: str | None, epoch: EpochView, pending: bool = False,
    ) -> CallRecord:
        """Write the row (and the price snapshot it names) to the ledger, completing its pending row
        when there is one, keep it for the summary, and announce it. A ledger that cannot take the
        row (`LedgerWriteError`: the disk is full) keeps it in its spool; the row is still kept and
        announced here before the error goes on, so the summary shows what the call used."""
        write = self.ledger.finish_call if pending else self.ledger.record_call
        try:
            record = write(record, price_table=self.price_table)
        except LedgerWriteError:
            self._keep(step, self.ledger.priced(record, self.price_table), stop_reason, epoch)
            raise
        self._keep(step, record, stop_reason, epoch)
        return record

    def _keep(self, step: int, record: CallRecord, stop_reason: str | None, epoch: EpochView) -> None:
        record = record.model_copy(update={"state": "done"})
        self.records.append((step, record))
        self._epochs.record(record, epoch)
        self.emit(
            CallRecorded(
                session_id=self.id,
                step=step,
                call_id=record.id,
                model=self.route.label,
                stop_reason=stop_reason,
                epoch=epoch.number,
                **call_facts(record),
            )
        )
