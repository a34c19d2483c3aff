"""`hitrate suite list` and `hitrate suite check`: inspect an eval suite and prove its tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from hitrate.harness.terminal_text import visible

# `hitrate --help` imports this module to list the command: the suite machinery (tasks, graders,
# the sandboxed shell they run in) loads only when a suite command runs.
if TYPE_CHECKING:
    from hitrate.evals.junit import TestOutcome
    from hitrate.evals.suite_check import TaskCheck
    from hitrate.evals.task import Suite

SuiteArg = Annotated[
    Optional[str],
    typer.Argument(
        help="Suite folder, the name of a bundled suite (default: 'basic'), or a published benchmark: "
        "aider-polyglot:PATH, swebench:FILE.jsonl, terminal-bench:PATH."
    ),
]
ReposOpt = Annotated[
    Optional[str], typer.Option("--repos", help="swebench: folder of local clones or mirrors (owner__name, owner/name or name, or a .bundle).")
]


def _console() -> Console:
    # Piped or captured output has no width of its own; a wide one keeps table rows on one line.
    console = Console()
    return console if console.is_terminal else Console(width=160)


def _load(suite: str | None, console: Console, repos: str | None = None) -> Suite:
    from hitrate.evals.benchmarks import BenchmarkError, resolve_suite
    from hitrate.evals.task import SuiteFormatError, load_suite

    try:
        loaded = load_suite(resolve_suite(suite, repos=repos))
    except (FileNotFoundError, SuiteFormatError, BenchmarkError) as exc:
        console.print(f"[red]error:[/red] {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    for task_id, reason in sorted(loaded.unavailable.items()):
        console.print(f"unavailable here: {task_id}: {reason}", markup=False, highlight=False, soft_wrap=True)
    return loaded


def _count(outcomes: dict[str, TestOutcome], ids: list[str]) -> int:
    from hitrate.evals.junit import TestOutcome

    return sum(outcomes[i] is TestOutcome.passed for i in ids)


def _check_table(suite: Suite, checks: list[TaskCheck]) -> Table:
    table = Table(title=f"suite check: {suite.name} ({suite.root})", box=box.SIMPLE_HEAD)
    table.add_column("task", no_wrap=True)
    table.add_column("level", no_wrap=True)
    table.add_column("F2P fail on ws", justify="right")
    table.add_column("P2P pass on ws", justify="right")
    table.add_column("pass with sol", justify="right")
    table.add_column("s", justify="right")
    table.add_column("verdict", no_wrap=True)
    for check in checks:
        checked = suite.task(check.task_id)
        f2p, p2p = checked.fail_to_pass, checked.pass_to_pass
        f2p_failing = len(f2p) - _count(check.on_workspace.outcomes, f2p)
        solved = _count(check.with_solution.outcomes, f2p + p2p)
        verdict = "[green]ok[/green]" if check.ok else "[red]BROKEN[/red]"
        table.add_row(
            check.task_id,
            check.difficulty,
            f"{f2p_failing}/{len(f2p)}",
            f"{_count(check.on_workspace.outcomes, p2p)}/{len(p2p)}",
            f"{solved}/{len(f2p) + len(p2p)}",
            f"{check.duration_s:.1f}",
            verdict,
        )
    return table


def register(app: typer.Typer) -> None:
    suite_app = typer.Typer(
        help="Eval task suites: list their tasks and prove each one is sound.", no_args_is_help=True
    )

    @suite_app.command("list")
    def list_tasks(suite: SuiteArg = None, repos: ReposOpt = None) -> None:
        """List a suite's tasks with difficulty, tags, limits and test counts."""
        console = _console()
        loaded = _load(suite, console, repos)
        table = Table(title=f"suite {loaded.name}: {len(loaded.tasks)} tasks ({loaded.root})", box=box.SIMPLE_HEAD)
        table.add_column("task", no_wrap=True)
        table.add_column("level", no_wrap=True)
        for numeric in ("F2P", "P2P", "steps", "max $", "wall s"):
            table.add_column(numeric, justify="right", no_wrap=True)
        table.add_column("tags", overflow="fold")
        table.add_column("title", overflow="fold")
        for task in loaded.tasks:
            spec = task.spec
            table.add_row(
                task.id,
                str(spec.difficulty),
                str(len(task.fail_to_pass)),
                str(len(task.pass_to_pass)),
                str(spec.limits.max_steps),
                f"{spec.limits.max_cost_usd:.2f}",
                f"{spec.limits.max_wall_s:g}",
                ", ".join(spec.tags),
                spec.title,
            )
        console.print(table)

    @suite_app.command("check")
    def check(
        suite: SuiteArg = None,
        repos: ReposOpt = None,
        task: Annotated[
            Optional[list[str]], typer.Option("--task", help="Check only this task id (repeatable).")
        ] = None,
        workers: Annotated[
            Optional[int], typer.Option("--workers", "-j", min=1,
                                        help="Tasks checked in parallel [default: the CPUs, at most 8].")
        ] = None,
        show_output: Annotated[
            bool, typer.Option("--show-output", help="Print pytest's output for every broken task.")
        ] = False,
    ) -> None:
        """Prove every task: F2P tests fail on workspace/, every test passes with solution/ applied."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from hitrate.evals.suite_check import check_tasks, default_workers

        workers = workers or default_workers()
        console = _console()
        loaded = _load(suite, console, repos)
        try:
            tasks = loaded.select(task) if task else loaded.tasks
        except KeyError as exc:
            console.print(f"[red]error:[/red] {exc.args[0]}", highlight=False)
            raise typer.Exit(2) from exc

        with Progress(
            TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=True,
        ) as progress:  # fmt: skip
            bar = progress.add_task("check", total=len(tasks))
            checks = check_tasks(tasks, workers=workers, on_done=lambda _: progress.advance(bar))

        console.print(_check_table(loaded, checks))
        broken = [c for c in checks if not c.ok]
        for c in broken:
            console.print(f"[red]{c.task_id}[/red]", highlight=False)
            for problem in c.problems:
                console.print(f"  - {problem}", highlight=False, markup=False, soft_wrap=True)
            if show_output:
                for label, result in (("workspace/", c.on_workspace), ("solution/", c.with_solution)):
                    console.rule(f"{c.task_id}: pytest output on {label}")
                    console.print(visible(result.output), highlight=False, markup=False, soft_wrap=True)
        total = sum(c.duration_s for c in checks)
        console.print(
            f"{len(checks) - len(broken)}/{len(checks)} tasks sound; {total:.1f} s of test runs, {workers} workers",
            highlight=False,
        )
        if broken:
            raise typer.Exit(1)

    app.add_typer(suite_app, name="suite")
