"""`hitrate eval --executor ray`: the run's tasks as Ray tasks, on `RAY_ADDRESS` or a local cluster.

The driver starts (or resumes) the run in its ledger as the thread executor does, then submits
one Ray task per task of the run. Each Ray task converts the suite where it runs, runs the task
with its own backend route, and records everything in a ledger shard of its own: a file in the
run's shard folder beside the driver's ledger, whose bytes it also returns (a worker on another
machine has no shared disk). The driver merges each shard as its task finishes, with the rules
of `hitrate ledger-merge` (`merge.py`): merging is idempotent, a finished task row wins over an
unfinished one, and the run row is shared.

Infrastructure errors are retried: a worker that dies (killed, out of memory, its node lost) is
rerun by Ray (`max_retries`), and a task that ends as `infra_error` is submitted again, up to
`retries` times, in the same ledger row. Shards a killed worker left behind are merged at the end,
so the calls it made before dying stay in the ledger. A task that still has no outcome stays
unfinished; `hitrate eval --resume` runs it again.

Workers read API keys and settings from their own environment (as `hitrate eval` does); a
benchmark suite's source (checkout, JSONL, repositories) must be at the same path on every node.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

from hitrate.evals.attempt import RunContext, TaskAttempt, TaskJob, TaskResult
from hitrate.evals.merge import merge_ledgers
from hitrate.evals.runner import EvalError, EvalRun, QuietObserver, RunObserver, RunPlan, final_status, prepare_run
from hitrate.evals.settings import EvalSettings, RouterRoutes
from hitrate.harness.events import CallRecorded
from hitrate.harness.local_backend import LocalEngineServer
from hitrate.harness.models import parse_model_spec
from hitrate.harness.policy import RecordedTurn
from hitrate.store.ledger import Ledger
from hitrate.store.records import new_id

DEFAULT_RETRIES = 2
RAY_MAX_RETRIES = 3
"""How often Ray reruns a task whose worker died."""
TASK_NAME_PREFIX = "hitrate-eval:"


def shard_folder(db_path: Path, run_id: str) -> Path:
    return db_path.parent / f"{db_path.stem}.shards" / run_id


def run_task_remote(payload: dict[str, Any]) -> dict[str, Any]:
    """Body of one Ray task: run one task of the run into a fresh ledger shard."""
    from hitrate.evals.benchmarks import resolve_suite
    from hitrate.evals.task import load_suite

    settings = EvalSettings.model_validate(payload["settings"])
    task = load_suite(resolve_suite(settings.suite, repos=settings.repos)).task(payload["task"])
    folder = Path(payload["shard_dir"])
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a node without the driver's disk
        folder = Path(tempfile.mkdtemp(prefix="hitrate-shard-"))
    shard = folder / f"{task.id}-{new_id()}.db"
    run_id, row_id = payload["run_id"], payload["row_id"]
    with Ledger(shard) as ledger:
        ledger.start_run(payload["run_label"], payload["run_config"], run_id=run_id)
        ledger.start_task(task.id, run_id, task_id=row_id, detail={"suite_task": task.id, "worker_pid": os.getpid()})
    unsent: list[dict[str, Any]] = []
    progress = payload.get("progress")

    def on_call(_name: str, event: CallRecorded) -> None:
        # Live to the driver's progress bar through the run's queue; kept for the result when the
        # queue cannot take it.
        data = event.model_dump(mode="json")
        try:
            progress.put_nowait((task.id, data))
        except Exception:
            unsent.append(data)

    sequences = None
    if payload.get("turns") is not None:
        sequences = {task.id: [[RecordedTurn.model_validate(t) for t in attempt] for attempt in payload["turns"]]}
    engine_url = payload.get("engine_url")
    routes = RouterRoutes(settings.model, server=_AttachedEngine(engine_url)) if engine_url else RouterRoutes(settings.model)  # type: ignore[arg-type]
    ctx = RunContext(
        settings=settings,
        run_id=run_id,
        db_path=shard,
        routes=routes,
        sequences=sequences,
        on_call=on_call,
    )
    job = TaskJob(task=task, ledger_task_id=row_id, previous_attempts=list(payload.get("previous_attempts") or []))
    try:
        result = TaskAttempt(job, ctx, threading.Event(), threading.Event()).run()
    finally:
        routes.close()
    with Ledger(shard) as ledger:
        row = ledger.get_task(row_id)
        if row.outcome is not None:
            # Where the task ran, for the report and for chasing a flaky node.
            where = {"executor": "ray", "worker_pid": os.getpid(), "node": os.uname().nodename, "ray_node_id": _node_id()}
            ledger.finish_task(row_id, row.outcome, {**row.detail, **where})
        ledger.finish_run(run_id, status="finished")
    conn = sqlite3.connect(shard)
    try:
        data = conn.serialize()
    finally:
        conn.close()
    return {"result": result.model_dump(mode="json") if result else None, "shard": shard.name, "data": data, "events": unsent}


class _AttachedEngine:
    """The driver's engine server, as a worker on the same machine sees it: started, not its to stop."""

    def __init__(self, url: str) -> None:
        self.url = url

    def start(self) -> str:
        return self.url

    def stop(self) -> None:
        """The driver stops its engine at the end of the run."""

    def metrics(self) -> dict[str, float]:
        return {}


def _single_machine(ray: Any) -> bool:
    """Every node of the cluster is the driver's machine (a local cluster)."""
    here = ray.util.get_node_ip_address()
    return all(node.get("NodeManagerAddress") == here for node in ray.nodes() if node.get("Alive"))


def _ray():
    try:
        import ray
    except ImportError as exc:
        raise EvalError("--executor ray needs Ray: pip install 'hitrate[cluster]'") from exc
    return ray


def _node_id() -> str | None:
    """The Ray node this worker runs on (several nodes can share a host name)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # outside a Ray worker
        return None


def run_eval_ray(
    settings: EvalSettings | None,
    *,
    db_path: str | Path,
    resume: str | None = None,
    run_id: str | None = None,
    address: str | None = None,
    retries: int = DEFAULT_RETRIES,
    observer: RunObserver | None = None,
    cancel: threading.Event | None = None,
) -> EvalRun:
    """Run (or resume) an eval with its tasks on Ray; see the module docstring. `address` (default
    $RAY_ADDRESS) names the cluster; without one, an already initialised Ray or a new local one."""
    ray = _ray()
    if retries < 0:
        raise EvalError("retries must be 0 or more")
    db_path = Path(db_path)
    observer = observer or QuietObserver()
    user_cancel = cancel or threading.Event()
    plan = prepare_run(db_path, settings, resume, run_id)
    settings, run = plan.settings, plan.run
    try:
        return _execute(ray, plan, db_path, address, retries, observer, user_cancel)
    except BaseException as exc:
        # The run's row says it did not finish; `--resume` picks it up.
        with Ledger(db_path) as ledger:
            ledger.finish_run(run.id, status="interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
        raise


def _execute(
    ray: Any, plan: RunPlan, db_path: Path, address: str | None, retries: int, observer: RunObserver, user_cancel: threading.Event
) -> EvalRun:
    settings, run = plan.settings, plan.run
    if plan.jobs and parse_model_spec(settings.model).wire != "local_engine":
        # A missing key or an unreachable server is one clear error here, not one per task.
        RouterRoutes(settings.model).open().close()
    if not plan.jobs:
        status = final_status(db_path, run.id, plan.tasks, False)
        return EvalRun(run_id=run.id, settings=settings, status=status, results=[], skipped=plan.skipped, unavailable=plan.suite.unavailable)
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or None
        # A local cluster started for this run needs no dashboard; workers' output stays in their logs.
        extra = {} if address else {"include_dashboard": False}
        ray.init(address=address, log_to_driver=False, **extra)
    engine = None
    if parse_model_spec(settings.model).wire == "local_engine" and _single_machine(ray):
        # On one machine the workers share one engine, as the thread executor's tasks do: one copy
        # of the model, and its prefix cache sees every task's requests.
        engine = LocalEngineServer(parse_model_spec(settings.model).model)
        engine.start()
    remote = ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(run_task_remote)
    from ray.util.queue import Empty, Queue

    # The calls every worker makes, as they are made: the progress bar's cost and hit ratio move
    # while tasks run. The queue's actor takes no CPU away from the tasks.
    progress = Queue(actor_options={"num_cpus": 0})

    def drain() -> None:
        try:
            items = progress.get_nowait_batch(progress.qsize())
        except Empty:
            return
        for name, event in items:
            observer.call_recorded(name, CallRecorded.model_validate(event))

    shards = shard_folder(db_path, run.id)
    shards.mkdir(parents=True, exist_ok=True)
    base = {
        "settings": settings.model_dump(mode="json"),
        "run_id": run.id,
        "run_label": run.label,
        "run_config": run.config,
        "shard_dir": str(shards),
        "progress": progress,
        "engine_url": engine.url if engine is not None else None,
    }

    def submit(job: TaskJob, row_id: str) -> Any:
        turns = None
        if plan.sequences is not None:
            turns = [[t.model_dump(mode="json") for t in attempt] for attempt in plan.sequences.get(job.task.id, [])]
        payload = {**base, "task": job.task.id, "row_id": row_id, "previous_attempts": job.previous_attempts, "turns": turns}
        observer.task_started(job.task.id)
        return remote.options(name=f"{TASK_NAME_PREFIX}{job.task.id}").remote(payload)

    observer.run_started(run.id, len(plan.jobs) + len(plan.skipped), len(plan.skipped))
    pending: dict[Any, tuple[TaskJob, str, int]] = {}
    for job in plan.jobs:
        row_id = job.ledger_task_id or new_id()
        pending[submit(job, row_id)] = (job, row_id, 0)
    results: dict[str, TaskResult] = {}
    errors: dict[str, str] = {}
    interrupted = False
    try:
        while pending:
            if user_cancel.is_set():
                raise KeyboardInterrupt
            done, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            drain()
            for ref in done:
                job, row_id, retried = pending.pop(ref)
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker died more often than Ray retries
                    errors[job.task.id] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    continue
                _merge_shard(db_path, shards / out["shard"], out["data"])
                for event in out["events"]:
                    observer.call_recorded(job.task.id, CallRecorded.model_validate(event))
                if out["result"] is None:
                    continue
                result = TaskResult.model_validate(out["result"])
                if result.outcome == "infra_error" and retried < retries:
                    attempts = [*job.previous_attempts, {"outcome": "infra_error", "error": result.detail}]
                    again = TaskJob(task=job.task, ledger_task_id=row_id, previous_attempts=attempts)
                    pending[submit(again, row_id)] = (again, row_id, retried + 1)
                    continue
                results[result.name] = result
                observer.task_finished(result)
    except KeyboardInterrupt:
        interrupted = True
        for ref in pending:
            ray.cancel(ref, force=True)
    finally:
        drain()
        ray.kill(progress.actor)
        if engine is not None:
            engine.stop()
        _merge_leftovers(db_path, shards)
    status = final_status(db_path, run.id, plan.tasks, interrupted)
    ordered = [results[t.id] for t in plan.tasks if t.id in results]
    return EvalRun(
        run_id=run.id,
        settings=settings,
        status=status,
        results=ordered,
        skipped=plan.skipped,
        unavailable=plan.suite.unavailable,
        errors=errors,
    )


def _merge_shard(db_path: Path, shard: Path, data: bytes) -> None:
    if not shard.exists():  # written on another machine: its bytes came back with the result
        # `serialize()` gave the database's whole content as one file image.
        shard.parent.mkdir(parents=True, exist_ok=True)
        partial = shard.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(shard)
    merge_ledgers(db_path, [shard])
    shard.unlink()


def _merge_leftovers(db_path: Path, shards: Path) -> None:
    """Merge the shards of workers that died mid-task (their calls and unfinished rows)."""
    leftovers = sorted(p for p in shards.glob("*.db") if p.is_file())
    if leftovers:
        merge_ledgers(db_path, leftovers)
        for path in leftovers:
            path.unlink()
    for extra in shards.glob("*.db-*"):  # WAL / shared-memory files of a killed writer
        extra.unlink(missing_ok=True)
    try:
        shards.rmdir()
        shards.parent.rmdir()
    except OSError:
        pass
