"""`hitrate eval`: run the agent over a suite, grade every task, record every call."""

from __future__ import annotations

import threading
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer

from hitrate.harness.cli import add_command

# The runner, the agent and the provider SDKs load when the command runs, not for `hitrate --help`.
if TYPE_CHECKING:
    from rich.console import Console

    from hitrate.evals.runner import EvalRun
    from hitrate.evals.settings import EvalSettings

EXIT_OK = 0
EXIT_INCOMPLETE = 1  # infra errors left: `--resume` runs those tasks again
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class LayoutChoice(StrEnum):
    cache_aware = "cache-aware"
    naive = "naive"


class CacheChoice(StrEnum):
    cold = "cold"
    warm = "warm"


class PolicyChoice(StrEnum):
    model = "model"
    replay = "replay"


class ExecutorChoice(StrEnum):
    threads = "threads"
    ray = "ray"


def register(app: typer.Typer) -> None:
    add_command(app, "eval", eval_command)


def _console() -> Console:
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)


def _fail(console: Console, message: str, code: int = EXIT_USAGE) -> NoReturn:
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def _nonce_of(db: Path, run_id: str) -> str:
    from hitrate.evals.runner import EvalError
    from hitrate.store.ledger import Ledger

    with Ledger(db) as ledger:
        try:
            run = ledger.get_run(run_id)
        except KeyError as exc:
            raise EvalError(f"no run {run_id!r} in {db} to take the cache nonce from") from exc
    nonce = (run.config.get("settings") or {}).get("nonce")
    if not nonce:
        raise EvalError(f"run {run_id} sent no nonce (it was a warm run); nothing to reuse")
    return str(nonce)


def _stored_settings(db: Path, run_id: str) -> EvalSettings:
    from hitrate.evals.runner import EvalError
    from hitrate.evals.settings import EvalSettings
    from hitrate.store.ledger import Ledger

    if not db.exists():
        raise EvalError(f"no run {run_id!r} in {db} to resume (no ledger there)")
    with Ledger(db) as ledger:
        try:
            run = ledger.get_run(run_id)
        except KeyError as exc:
            raise EvalError(f"no run {run_id!r} in {db} to resume") from exc
    stored = run.config.get("settings")
    if not isinstance(stored, dict):
        raise EvalError(f"run {run_id} is not an eval run")
    return EvalSettings.model_validate(stored)


def _resume_clashes(db: Path, run_id: str, given: dict[str, object]) -> list[str]:
    """Options given with --resume whose value differs from the run's own, as "--model differs
    (run: a, given: b)"."""
    from hitrate.evals.benchmarks import canonical_suite

    stored = _stored_settings(db, run_id)
    nonce_from = given["--nonce-from"]
    run_value: dict[str, object] = {
        "suite": stored.suite, "--model": stored.model, "--layout": stored.layout, "--cache": stored.cache_mode,
        "--tries": stored.tries, "--policy": stored.policy, "--replay-from": stored.replay_from,
        "--task": sorted(stored.task_ids) if stored.task_ids else None, "--shard": stored.shard, "--run-id": run_id,
        "--nonce-from": stored.nonce, "--max-output-tokens": stored.max_output_tokens, "--label": stored.label,
        "--repos": stored.repos, "--max-steps": stored.max_steps, "--max-wall": stored.max_wall_s,
        "--tool-protocol": stored.tool_protocol,
    }  # fmt: skip
    as_given: dict[str, object] = {
        **given,
        "suite": canonical_suite(str(given["suite"])) if given["suite"] is not None else None,
        "--repos": str(Path(str(given["--repos"])).expanduser().resolve()) if given.get("--repos") is not None else None,
        "--task": sorted(given["--task"]) if given["--task"] else None,  # type: ignore[call-overload]
        "--nonce-from": _nonce_of(db, str(nonce_from)) if nonce_from is not None else None,
    }
    clashes = []
    for name, value in as_given.items():
        if value is None:
            continue
        if isinstance(value, StrEnum):
            value = value.value
        if value != run_value[name]:
            clashes.append(f"{name} differs (run: {run_value[name]}, given: {given[name] if name != 'suite' else value})")
    return clashes


def eval_command(
    suite: Annotated[Optional[str], typer.Argument(help="Suite folder, bundled suite name (default: 'basic'), or a published benchmark: aider-polyglot:PATH, swebench:FILE.jsonl, terminal-bench:PATH.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="provider/model, as for `hitrate run` (default: $HITRATE_MODEL, the config file, ...).")] = None,
    workers: Annotated[int, typer.Option("--workers", "-j", min=1, help="Tasks run at once.")] = 1,
    layout: Annotated[Optional[LayoutChoice], typer.Option("--layout", help="cache-aware (the projection) or naive (volatile system prompt, unsorted tools, no cache marks).")] = None,
    cache: Annotated[Optional[CacheChoice], typer.Option("--cache", help="cold: a per-run nonce starts every prompt, nothing cached before can hit; warm: reuse earlier caches.")] = None,
    tries: Annotated[Optional[int], typer.Option("--tries", min=1, max=2, help="2: failing test output goes back to the agent once.")] = None,
    policy: Annotated[Optional[PolicyChoice], typer.Option("--policy", help="model: the model decides; replay: a recorded tool-call sequence does (see --replay-from).")] = None,
    replay_from: Annotated[Optional[str], typer.Option("--replay-from", help="With --policy replay: the run whose recorded turns to replay (default: the suite's reference sequences).")] = None,
    task: Annotated[Optional[list[str]], typer.Option("--task", "-t", help="Only this task (repeatable).")] = None,
    shard: Annotated[Optional[str], typer.Option("--shard", help="i/n: only the i-th of n deterministic shards of the tasks.")] = None,
    resume: Annotated[Optional[str], typer.Option("--resume", help="Finish this run: skip finished tasks, rerun infra errors and unfinished ones.")] = None,
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="Id for the new run (give the same one to every shard, then merge the ledgers).")] = None,
    nonce_from: Annotated[Optional[str], typer.Option("--nonce-from", help="Warm run: send the nonce of this earlier cold run, to reuse what it cached.")] = None,
    max_output_tokens: Annotated[Optional[int], typer.Option("--max-output-tokens", min=1, help="max_tokens of each call (default: the model's own budget, with room for thinking; 16 when replaying).")] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="A name for the run.")] = None,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1, help="Most model calls per task, over each task's own max_steps.")] = None,
    max_wall: Annotated[Optional[float], typer.Option("--max-wall", min=0.001, help="Seconds per task, over each task's own max_wall_s.")] = None,
    tool_protocol: Annotated[Optional[str], typer.Option("--tool-protocol", help="native (the API's function calling) or text (one fenced shell block per reply, for models whose function calling is unreliable). Default: the model's tool_protocol in the config file, else text for the packaged small models (hitrate models), native for the rest.")] = None,
    repos: Annotated[Optional[str], typer.Option("--repos", help="swebench suites: folder of local clones or mirrors (default: repos/ beside the JSONL).")] = None,
    db: Annotated[Optional[Path], typer.Option("--db", help="Ledger file (default: $HITRATE_DB or the user data dir).")] = None,
    keep_workspaces: Annotated[bool, typer.Option("--keep-workspaces", help="Keep each task's workspace copy (its path goes in the task's ledger detail).")] = False,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Print the run's report at the end.")] = True,
    executor: Annotated[ExecutorChoice, typer.Option("--executor", help="threads: --workers threads here; ray: one Ray task per task, on $RAY_ADDRESS or a local Ray cluster (the 'cluster' extra).")] = ExecutorChoice.threads,
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", help="With --executor ray: the cluster to join (default: $RAY_ADDRESS, else a local one).")] = None,
    retries: Annotated[int, typer.Option("--retries", min=0, help="With --executor ray: how often a task that ended in an infra error is run again.")] = 2,
) -> None:
    """Run the agent over SUITE and grade every task with its hidden tests.

    Each task runs in a fresh copy of its workspace, under its limits. Every call goes to the
    ledger, tagged with the run, task, session, layout and cache mode. Exit codes: 0 finished,
    1 infra errors left (rerun them with --resume), 2 bad arguments, 130 interrupted."""
    from hitrate.evals.progress import RichProgress
    from hitrate.evals.replay import ReplayError
    from hitrate.evals.runner import EvalError, run_eval
    from hitrate.evals.settings import EvalSettings
    from hitrate.evals.shard import parse_shard
    from hitrate.evals.benchmarks import canonical_suite
    from hitrate.evals.task import SuiteFormatError
    from hitrate.harness.models import ModelSpecError
    from hitrate.store.ledger import default_ledger_path

    from hitrate.harness.defaults import config_path
    from hitrate.tools.confine import hide_from_commands

    console = _console()
    db_path = db or default_ledger_path()
    hide_from_commands(db_path, config_path())  # the agent's shell and grading never see them, wherever they are
    settings: EvalSettings | None = None
    if resume is not None:
        given = {"suite": suite, "--model": model, "--layout": layout, "--cache": cache, "--tries": tries, "--policy": policy,
                 "--replay-from": replay_from, "--task": task, "--shard": shard, "--run-id": run_id, "--nonce-from": nonce_from,
                 "--max-output-tokens": max_output_tokens, "--label": label, "--repos": repos,
                 "--max-steps": max_steps, "--max-wall": max_wall, "--tool-protocol": tool_protocol}  # fmt: skip
        if any(value is not None for value in given.values()):
            # The original command line with --resume appended is fine; a setting that differs is not.
            try:
                clash = _resume_clashes(db_path, resume, given)
            except (EvalError, FileNotFoundError, ValueError) as exc:
                _fail(console, str(exc))
            if clash:
                _fail(console, f"--resume keeps the run's own settings; {'; '.join(clash)}: drop them, or start a new run")
    else:
        try:
            if shard is not None:
                parse_shard(shard)
            suite_spec = canonical_suite(suite)
            repos_path = str(Path(repos).expanduser().resolve()) if repos is not None else None
            spec = model or _default_model(policy)
            cache_mode = (cache or CacheChoice.cold).value
            if nonce_from is not None and cache_mode != "warm":
                _fail(console, "--nonce-from is for warm runs: add --cache warm")
            if replay_from is not None and policy is not PolicyChoice.replay:
                _fail(console, "--replay-from needs --policy replay")
            settings = EvalSettings(
                suite=suite_spec,
                repos=repos_path,
                model=spec,
                layout=(layout or LayoutChoice.cache_aware).value,
                cache_mode=cache_mode,
                tries=tries or 1,
                policy=(policy or PolicyChoice.model).value,
                replay_from=replay_from,
                task_ids=list(task) if task else None,
                shard=shard,
                nonce=_nonce_of(db_path, nonce_from) if nonce_from else None,
                max_output_tokens=max_output_tokens,
                label=label,
                max_steps=max_steps,
                max_wall_s=max_wall,
                tool_protocol=_tool_protocol(console, tool_protocol),
            )
        except (FileNotFoundError, ModelSpecError, EvalError, ValueError) as exc:
            _fail(console, str(exc))

    cancel = threading.Event()
    title = "eval" if settings is None else f"eval {settings.layout} · {settings.cache_mode}"
    try:
        with RichProgress(title, console=console) as progress:
            if executor is ExecutorChoice.ray:
                from hitrate.evals.ray_executor import run_eval_ray

                result = run_eval_ray(settings, db_path=db_path, resume=resume, run_id=run_id, address=ray_address, retries=retries,
                                      observer=progress, cancel=cancel)  # fmt: skip
            else:
                result = run_eval(settings, db_path=db_path, resume=resume, run_id=run_id, workers=workers, observer=progress, cancel=cancel,
                                  keep_workspaces=keep_workspaces)  # fmt: skip
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]: finished tasks are recorded; `hitrate eval --resume <run>` runs the rest")
        raise typer.Exit(EXIT_INTERRUPTED)
    except (EvalError, ReplayError, SuiteFormatError, ModelSpecError, FileNotFoundError, ValueError) as exc:
        _fail(console, str(exc))
    _summary(console, result, db_path, report)
    raise typer.Exit({"finished": EXIT_OK, "interrupted": EXIT_INTERRUPTED}.get(result.status, EXIT_INCOMPLETE))


def _default_model(policy: PolicyChoice | None) -> str:
    """The configured model; with --policy replay and none configured, the tiny random-weight demo
    model on the bundled engine (offline, free): a replay's turns come from its script, not from
    the model's judgment, but its requests still go through a real backend."""
    from hitrate.harness.defaults import NoModelError, default_model

    try:
        return default_model()
    except NoModelError:
        if policy is not PolicyChoice.replay:
            raise
    from hitrate.harness.cli import require_extra
    from hitrate.harness.demo import cache_dir, ensure_demo_model

    require_extra("local", "a replay without --model (it serves the tiny demo model with the bundled engine)")
    return f"local/{ensure_demo_model(cache_dir())}"


def _tool_protocol(console: Console, value: str | None) -> str | None:
    if value not in (None, "native", "text"):
        _fail(console, f"--tool-protocol must be native or text, not {value!r}")
    return value


def _summary(console: Console, result: EvalRun, db_path: Path, show_report: bool) -> None:
    from rich.markup import escape

    from hitrate.harness.terminal_text import visible

    ran = len(result.results)
    console.print(
        f"run [bold]{escape(result.run_id)}[/bold]: {result.status}; {ran} task(s) run"
        + (f", {len(result.skipped)} already finished" if result.skipped else ""),
        highlight=False,
    )
    for task_id, error in sorted(result.errors.items()):
        console.print(f"  {task_id}: unfinished: {escape(error[:200])}", highlight=False)
    for task_id, reason in sorted(result.unavailable.items()):
        console.print(f"  {task_id}: unavailable here: {escape(reason)}", highlight=False)
    for item in result.results:
        if item.outcome != "pass" and item.detail:
            # The detail quotes the graded code's output: its control characters are shown, not obeyed.
            console.print(f"  {escape(visible(item.name))}: {item.outcome}: {escape(visible(item.detail[:200]))}", highlight=False)
    if show_report:
        from hitrate.evals.report import load_report
        from hitrate.evals.report_render import tables

        console.print(tables(load_report(db_path, [result.run_id])))
    console.print(f"report: hitrate report {result.run_id} --db {db_path}", highlight=False, markup=False)
    if result.status != "finished":
        console.print(f"resume: hitrate eval --resume {result.run_id} --db {db_path}", highlight=False, markup=False)
