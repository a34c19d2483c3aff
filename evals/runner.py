"""The eval runner: a suite's tasks in parallel workers, every call in the ledger, resumable.

    result = run_eval(EvalSettings(suite=..., model="anthropic/claude-sonnet-5"), db_path=...)
    result = run_eval(None, db_path=..., resume="<run id>")   # finish what an earlier run left

A run is one ledger row (`runs`) whose config holds its `EvalSettings`; each task is one `tasks`
row (name = the suite's task id, outcome, and a detail with both tries, the grading counts and
the recorded assistant turns), and every model call carries the run, task and session ids and
the layout / cache-mode tags. Resuming skips tasks with a final outcome and runs again the ones
that ended in an infra error or never finished, in their existing ledger row (the money already
spent stays recorded against the task).

Workers are threads: an agent waits on its backend most of the time, and a local model runs in
one engine server that every worker's requests go to.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from hitrate.evals.attempt import RunContext, TaskAttempt, TaskJob, TaskResult
from hitrate.evals.benchmarks import BenchmarkError, resolve_suite
from hitrate.evals.nonce import run_nonce
from hitrate.evals.replay import FINISHED_OUTCOMES, ReplayError, recorded_sequences
from hitrate.evals.settings import EvalSettings, RouterRoutes, RouteSource
from hitrate.evals.shard import parse_shard
from hitrate.evals.task import Suite, Task, load_suite
from hitrate.harness.events import CallRecorded
from hitrate.store.ledger import Ledger
from hitrate.store.records import RunRecord, new_id

RUN_KIND = "eval"


class EvalError(ValueError):
    """The run cannot start as asked (bad settings, unknown run to resume, ...)."""


class RunObserver(Protocol):
    """Follows a run (the progress bar). Methods are called from worker threads."""

    def run_started(self, run_id: str, total: int, skipped: int) -> None: ...

    def task_started(self, name: str) -> None: ...

    def call_recorded(self, name: str, event: CallRecorded) -> None: ...

    def task_finished(self, result: TaskResult) -> None: ...


class QuietObserver:
    def run_started(self, run_id: str, total: int, skipped: int) -> None:
        pass

    def task_started(self, name: str) -> None:
        pass

    def call_recorded(self, name: str, event: CallRecorded) -> None:
        pass

    def task_finished(self, result: TaskResult) -> None:
        pass


class EvalRun(BaseModel):
    """What `run_eval` did."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    settings: EvalSettings
    status: str
    """finished (every task has a final outcome), incomplete (infra errors left) or interrupted."""
    results: list[TaskResult]
    """Tasks run by this invocation, in suite order."""
    skipped: list[str]
    """Tasks a resumed run had already finished."""
    unavailable: dict[str, str] = {}
    """Tasks of the suite that cannot run on this machine, with why (not run, not in the ledger)."""
    errors: dict[str, str] = {}
    """Tasks left unfinished because their executor failed them (a Ray worker that kept dying)."""


def select_tasks(suite: Suite, settings: EvalSettings) -> list[Task]:
    """The run's tasks: the listed ones (or all), then this shard of them, in suite order."""
    try:
        tasks = suite.select(settings.task_ids) if settings.task_ids else list(suite.tasks)
    except KeyError as exc:
        raise EvalError(str(exc.args[0])) from exc
    if settings.shard:
        chosen = {t.id for t in parse_shard(settings.shard).select(tasks)}
        tasks = [t for t in tasks if t.id in chosen]
    return tasks


def _plan(ledger: Ledger, run_id: str, tasks: list[Task]) -> tuple[list[TaskJob], list[str]]:
    """Jobs for the tasks still to do, and the names of those already finished."""
    rows: dict[str, list[Any]] = {}
    for row in ledger.tasks(run_id=run_id):
        rows.setdefault(row.name, []).append(row)
    jobs: list[TaskJob] = []
    skipped: list[str] = []
    for task in tasks:
        existing = rows.get(task.id, [])
        if any(r.outcome in FINISHED_OUTCOMES for r in existing):
            skipped.append(task.id)
            continue
        if not existing:
            jobs.append(TaskJob(task=task))
            continue
        row = existing[-1]
        previous = list(row.detail.get("previous_attempts") or [])
        previous.append({
            "outcome": row.outcome or "unfinished",
            "error": row.detail.get("error"),
            "started_at": row.started_at.isoformat(),
        })  # fmt: skip
        jobs.append(TaskJob(task=task, ledger_task_id=row.id, previous_attempts=previous))
    return jobs, skipped


def _start_or_resume(
    ledger: Ledger, settings: EvalSettings | None, resume: str | None, run_id: str | None
) -> tuple[RunRecord, EvalSettings]:
    if resume is not None:
        try:
            run = ledger.get_run(resume)
        except KeyError as exc:
            raise EvalError(f"no run {resume!r} in {ledger.path} to resume") from exc
        stored = run.config.get("settings")
        if run.config.get("kind") != RUN_KIND or not isinstance(stored, dict):
            raise EvalError(f"run {resume} is not an eval run")
        resumed = EvalSettings.model_validate(stored)
        if settings is not None and settings != resumed:
            raise EvalError(f"run {resume} was started with other settings; resume it without changing them")
        return run, resumed
    if settings is None:
        raise EvalError("give the run's settings, or a run to resume")
    run_id = run_id or new_id()
    if settings.cache_mode == "cold" and settings.nonce is None:
        settings = settings.model_copy(update={"nonce": run_nonce(run_id)})
    label = settings.label or f"{Path(settings.suite.rpartition(':')[2]).name} · {settings.model} · {settings.layout} · {settings.cache_mode}"
    config = {
        "kind": RUN_KIND,
        "settings": settings.model_dump(mode="json"),
        # Flat copies for readers that group runs (the report looks for these keys).
        "model": settings.model,
        "layout": settings.layout,
        "cache_mode": settings.cache_mode,
        "policy": settings.policy,
        "tries": settings.tries,
        "shard": settings.shard,
    }
    # Which tasks of the suite cannot run on this machine: a report of the run's pass rate can say
    # what its denominator left out.
    unavailable = load_suite(resolve_suite(settings.suite, repos=settings.repos)).unavailable
    if unavailable:
        config["unavailable"] = unavailable
    try:
        ledger.get_run(run_id)
    except KeyError:
        return ledger.start_run(label, config, run_id=run_id), settings
    raise EvalError(f"run {run_id} already exists in {ledger.path}; to finish it, use --resume {run_id}")


def _check_recorded(replay_from: str, tasks: list[Task], sequences: dict[str, Any]) -> None:
    """Refuse before any task runs when the replayed run recorded no turns for some selected task:
    each of those would otherwise end as an infra error, one by one."""
    missing = [t.id for t in tasks if t.id not in sequences]
    if not missing:
        return
    recorded = sorted(sequences)
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    hint = (" ".join(f"--task {t}" for t in recorded[:8]) + (" ..." if len(recorded) > 8 else "")) if recorded else ""
    raise ReplayError(
        f"run {replay_from} recorded no finished turns for {len(missing)} of the {len(tasks)} selected task(s) ({shown})"
        + (f"; replay only the recorded ones: {hint}" if hint else "; it has none to replay")
    )


@dataclasses.dataclass
class RunPlan:
    """A started (or resumed) run: its ledger row, settings, tasks, and what is left to do."""

    run: RunRecord
    settings: EvalSettings
    suite: Suite
    tasks: list[Task]
    sequences: dict[str, Any] | None
    jobs: list[TaskJob]
    skipped: list[str]


def prepare_run(db_path: Path, settings: EvalSettings | None, resume: str | None, run_id: str | None) -> RunPlan:
    """Start or resume the run in the ledger and plan its tasks (whichever executor runs them)."""
    with Ledger(db_path) as ledger:
        run, settings = _start_or_resume(ledger, settings, resume, run_id)
        try:
            suite = load_suite(resolve_suite(settings.suite, repos=settings.repos))
            tasks = select_tasks(suite, settings)
            sequences = None
            if settings.policy == "replay" and settings.replay_from:
                sequences = recorded_sequences(ledger, settings.replay_from)
                _check_recorded(settings.replay_from, tasks, sequences)
            jobs, skipped = _plan(ledger, run.id, tasks)
        except (ReplayError, EvalError, BenchmarkError, OSError, ValueError):
            if resume is None:
                ledger.finish_run(run.id, status="failed")
            raise
    return RunPlan(run=run, settings=settings, suite=suite, tasks=tasks, sequences=sequences, jobs=jobs, skipped=skipped)


def run_eval(
    settings: EvalSettings | None,
    *,
    db_path: str | Path,
    resume: str | None = None,
    run_id: str | None = None,
    workers: int = 1,
    routes: RouteSource | None = None,
    env: dict[str, str] | None = None,
    observer: RunObserver | None = None,
    cancel: threading.Event | None = None,
    keep_workspaces: bool = False,
    naive_clock: Callable[[], Any] | None = None,
) -> EvalRun:
    """Run (or resume) an eval; see the module docstring. `routes` overrides where backends come
    from (default: the harness router for `settings.model`, with `env` for keys and URLs)."""
    if workers < 1:
        raise EvalError("workers must be at least 1")
    db_path = Path(db_path)
    observer = observer or QuietObserver()
    user_cancel = cancel or threading.Event()
    plan = prepare_run(db_path, settings, resume, run_id)
    run, settings, suite, tasks, sequences = plan.run, plan.settings, plan.suite, plan.tasks, plan.sequences
    jobs, skipped = plan.jobs, plan.skipped
    own_routes = routes is None
    routes = routes or RouterRoutes(settings.model, env=env)
    ctx = RunContext(
        settings=settings,
        run_id=run.id,
        db_path=db_path,
        routes=routes,
        sequences=sequences,
        on_call=observer.call_recorded,
        keep_workspaces=keep_workspaces,
        naive_clock=naive_clock,
    )
    observer.run_started(run.id, len(jobs) + len(skipped), len(skipped))
    results: dict[str, TaskResult] = {}
    interrupted = False
    try:
        if jobs:
            # Resolve the backend once before any task: a missing key or an unreachable server is
            # one clear error, not an infra error per task.
            routes.open().close()
        interrupted = _execute(jobs, ctx, workers, observer, user_cancel, results)
    except BaseException as exc:
        with Ledger(db_path) as ledger:
            ledger.finish_run(run.id, status="interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
        raise
    finally:
        if own_routes:
            routes.close()
    status = final_status(db_path, run.id, tasks, interrupted)
    ordered = [results[t.id] for t in tasks if t.id in results]
    return EvalRun(
        run_id=run.id, settings=settings, status=status, results=ordered, skipped=skipped, unavailable=suite.unavailable
    )


def _execute(
    jobs: list[TaskJob],
    ctx: RunContext,
    workers: int,
    observer: RunObserver,
    user_cancel: threading.Event,
    results: dict[str, TaskResult],
) -> bool:
    """Run the jobs on a thread pool; True when the user interrupted the run."""
    active: set[threading.Event] = set()
    lock = threading.Lock()

    def work(job: TaskJob) -> TaskResult | None:
        if user_cancel.is_set():
            return None
        task_cancel = threading.Event()
        with lock:
            active.add(task_cancel)
        try:
            observer.task_started(job.task.id)
            result = TaskAttempt(job, ctx, task_cancel, user_cancel).run()
        finally:
            with lock:
                active.discard(task_cancel)
        if result is not None:
            observer.task_finished(result)
        return result

    def stop_all() -> None:
        user_cancel.set()
        with lock:
            for event in active:
                event.set()

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval") as pool:
        pending: set[Future] = {pool.submit(work, job) for job in jobs}
        try:
            while pending:
                if user_cancel.is_set():
                    stop_all()
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    result = future.result()
                    if result is not None:
                        results[result.name] = result
        except KeyboardInterrupt:
            stop_all()
            for future in pending:
                future.cancel()
            for future in pending:
                if not future.cancelled():
                    result = future.result()
                    if result is not None:
                        results[result.name] = result
            return True
    return user_cancel.is_set()


def final_status(db_path: Path, run_id: str, tasks: list[Task], interrupted: bool) -> str:
    with Ledger(db_path) as ledger:
        outcomes: dict[str, set[str]] = {}
        for row in ledger.tasks(run_id=run_id):
            outcomes.setdefault(row.name, set()).add(row.outcome or "unfinished")
        done = all(outcomes.get(t.id, set()) & FINISHED_OUTCOMES for t in tasks)
        status = "interrupted" if interrupted else ("finished" if done else "incomplete")
        ledger.finish_run(run_id, status=status)
    return status
