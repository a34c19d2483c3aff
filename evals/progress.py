"""The eval run's live progress bar: tasks done, outcomes so far, running cost and hit ratio."""

from __future__ import annotations

import threading
from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from hitrate.evals.attempt import TaskResult
from hitrate.harness.events import CallRecorded

_MARKS = {"pass": "[green]✓[/green]", "fail": "[red]✗[/red]", "agent_error": "[yellow]![/yellow]",
          "timeout": "[yellow]⏱[/yellow]", "infra_error": "[magenta]⚠[/magenta]"}  # fmt: skip


class RunningTotals:
    """Thread-safe sums over the calls recorded so far."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.failed_calls = 0
        self.cost_usd = 0.0
        self.priced_calls = 0
        self.read = 0
        self.prompt = 0
        self.outcomes: Counter[str] = Counter()
        self.finished_earlier = 0
        """Tasks a resumed run had already finished (their calls are not in these totals)."""

    def add_call(self, event: CallRecorded) -> None:
        usage = event.usage
        with self._lock:
            if event.error is not None:
                # A failed call has no response and no price: it is neither "unpriced" nor a miss.
                self.failed_calls += 1
                return
            self.calls += 1
            if event.cost_usd is not None:
                self.cost_usd += event.cost_usd
                self.priced_calls += 1
            parts = (usage.cache_read, usage.cache_write_total, usage.fresh_input)
            if all(p is not None for p in parts):
                self.read += usage.cache_read or 0
                self.prompt += sum(p or 0 for p in parts)

    def add_outcome(self, outcome: str) -> None:
        with self._lock:
            self.outcomes[outcome] += 1

    def cost_text(self) -> str:
        if self.priced_calls == 0:
            return "unpriced" if self.calls else "$0.00"
        unpriced = self.calls - self.priced_calls
        return f"${self.cost_usd:,.4f}" + (f" (+{unpriced} unpriced)" if unpriced else "")

    def hit_text(self) -> str:
        return f"hit {self.read / self.prompt:.0%}" if self.prompt else "hit –"

    def outcome_text(self) -> str:
        marks = [f"{_MARKS.get(o, o)} {n}" for o, n in sorted(self.outcomes.items())]
        if self.finished_earlier:
            marks.insert(0, f"[dim]{self.finished_earlier} done before[/dim]")
        return " ".join(marks)


class RichProgress:
    """A `RunObserver` drawing a rich progress bar; use as a context manager around `run_eval`."""

    def __init__(self, label: str, console: Console | None = None) -> None:
        self.label = label
        self.totals = RunningTotals()
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[outcomes]}"),
            TextColumn("{task.fields[cost]}"),
            TextColumn("{task.fields[hit]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._task = self.progress.add_task(escape(label), total=None, outcomes="", cost="$0.00", hit="hit –", start=False)

    def __enter__(self) -> "RichProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._refresh()
        self.progress.stop()

    def _refresh(self) -> None:
        self.progress.update(
            self._task, outcomes=self.totals.outcome_text(), cost=self.totals.cost_text(), hit=self.totals.hit_text()
        )

    def run_started(self, run_id: str, total: int, skipped: int) -> None:
        self.totals.finished_earlier = skipped
        self.progress.update(self._task, total=total, completed=skipped, description=f"{escape(self.label)} [dim]{escape(run_id[-8:])}[/dim]")
        self.progress.start_task(self._task)
        self._refresh()

    def task_started(self, name: str) -> None:
        pass

    def call_recorded(self, name: str, event: CallRecorded) -> None:
        self.totals.add_call(event)
        self._refresh()

    def task_finished(self, result: TaskResult) -> None:
        self.totals.add_outcome(result.outcome)
        self.progress.advance(self._task)
        self._refresh()
