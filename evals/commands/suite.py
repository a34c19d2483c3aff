"""`hitrate suite list` and `hitrate suite check`: inspect an eval suite and prove its tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

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


#: From this many columns `suite list` gives tags a column of their own.
TAGS_COLUMN_FROM = 120


def _console() -> Console:
    # A terminal's own width (or COLUMNS); a pipe or a file gets the 80 columns every table does.
    from hitrate.harness.commands.format import table_width

    console = Console()
    return console if console.is_terminal else Console(width=table_width())


LanguageOpt = Annotated[
    Optional[str],
    typer.Option("--language", help="Only tasks of these languages, comma-separated (an Exercism track: python,cpp,rust,go,java,javascript)."),
]


def _languages(value: str | None) -> set[str]:
    return {part.strip().lower() for part in (value or "").split(",") if part.strip()}


def _load(suite: str | None, console: Console, repos: str | None = None, languages: set[str] | None = None) -> Suite:
    from hitrate.evals.benchmarks import BenchmarkError, resolve_suite
    from hitrate.evals.task import SuiteFormatError, load_suite

    try:
        loaded = load_suite(resolve_suite(suite, repos=repos))
    except (FileNotFoundError, SuiteFormatError, BenchmarkError) as exc:
        console.print(f"[red]error:[/red] {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    if languages:
        # A converted task is tagged with its language; its id starts with it (python-leap).
        unavailable = {t: r for t, r in loaded.unavailable.items() if t.split("-", 1)[0] in languages}
        loaded = loaded.model_copy(update={"tasks": [t for t in loaded.tasks if languages & set(t.spec.tags)], "unavailable": unavailable})
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
        verdict = {"ok": "[green]ok[/green]", "BROKEN": "[red]BROKEN[/red]"}.get(check.verdict, f"[yellow]{check.verdict}[/yellow]")
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


def _output_title(task) -> str:
    """What produced a task's test output: its test command's program (cargo, cmake, go, ...)."""
    from hitrate.evals.task_graders import CommandGrader, HarborGrader

    grader = task.spec.grader
    if isinstance(grader, CommandGrader):
        return grader.title
    if isinstance(grader, HarborGrader):
        return "tests/test.sh"
    return "pytest"


def register(app: typer.Typer) -> None:
    suite_app = typer.Typer(
        help="Eval task suites: list their tasks and prove each one is sound.", no_args_is_help=True
    )

    @suite_app.command("list")
    def list_tasks(suite: SuiteArg = None, repos: ReposOpt = None, language: LanguageOpt = None) -> None:
        """List a suite's tasks with difficulty, tags, limits and test counts."""
        console = _console()
        loaded = _load(suite, console, repos, _languages(language))
        table = Table(title=f"suite {loaded.name}: {len(loaded.tasks)} tasks ({loaded.root})", box=box.SIMPLE_HEAD)
        # From TAGS_COLUMN_FROM columns the title and the tags have columns of their own; narrower,
        # they go under the task's id, so the figures stay whole and the title keeps its room.
        wide = console.width >= TAGS_COLUMN_FROM
        table.leading = 0 if wide else 1  # a blank line between tasks of three lines each
        table.add_column("task" if wide else "task, title, tags", no_wrap=wide, overflow="fold", ratio=None if wide else 1)
        table.add_column("level", no_wrap=True)
        for numeric in ("F2P", "P2P", "steps", "max $", "wall s"):
            table.add_column(numeric, justify="right", no_wrap=True)
        if wide:
            table.add_column("tags", overflow="fold")
            table.add_column("title", overflow="fold")
        for task in loaded.tasks:
            spec = task.spec
            tags = ", ".join(spec.tags)
            figures = [str(spec.difficulty), str(len(task.fail_to_pass)), str(len(task.pass_to_pass)), str(spec.limits.max_steps),
                       f"{spec.limits.max_cost_usd:.2f}", f"{spec.limits.max_wall_s:g}"]
            if wide:
                table.add_row(task.id, *figures, tags, Text(spec.title))
            else:
                table.add_row(Text.assemble((task.id, "bold"), "\n", spec.title, "\n", (tags, "dim")), *figures)
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
            bool, typer.Option("--show-output", help="Print the test command's output for every broken task.")
        ] = False,
        language: LanguageOpt = None,
        sample: Annotated[
            Optional[int], typer.Option("--sample", min=1, help="Check this many tasks drawn at random (see --seed).")
        ] = None,
        seed: Annotated[int, typer.Option("--seed", help="Seed of --sample's draw.")] = 0,
    ) -> None:
        """Prove every task: F2P tests fail on workspace/, every test passes with solution/ applied."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from hitrate.evals.suite_check import check_tasks, default_workers

        workers = workers or default_workers()
        console = _console()
        loaded = _load(suite, console, repos, _languages(language))
        try:
            tasks = loaded.select(task) if task else loaded.tasks
        except KeyError as exc:
            console.print(f"[red]error:[/red] {exc.args[0]}", highlight=False)
            raise typer.Exit(2) from exc
        if sample is not None and sample < len(tasks):
            import random

            drawn = set(random.Random(seed).sample(range(len(tasks)), sample))
            tasks = [t for i, t in enumerate(tasks) if i in drawn]

        with Progress(
            TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=True,
        ) as progress:  # fmt: skip
            bar = progress.add_task("check", total=len(tasks))
            checks = check_tasks(tasks, workers=workers, on_done=lambda _: progress.advance(bar))

        console.print(_check_table(loaded, checks))
        broken = [c for c in checks if c.problems]
        for c in checks:
            if c.not_runnable is not None:
                console.print(f"not runnable here: {c.task_id}: {c.not_runnable}", highlight=False, markup=False, soft_wrap=True)
        for c in broken:
            console.print(f"[red]{c.task_id}[/red]", highlight=False)
            for problem in c.problems:
                console.print(f"  - {problem}", highlight=False, markup=False, soft_wrap=True)
            if show_output:
                tool = _output_title(loaded.task(c.task_id))
                for label, result in (("workspace/", c.on_workspace), ("solution/", c.with_solution)):
                    console.rule(f"{c.task_id}: {tool} output on {label}")
                    console.print(visible(result.output), highlight=False, markup=False, soft_wrap=True)
        total = sum(c.duration_s for c in checks)
        sound = sum(c.ok for c in checks)
        unproved = len(checks) - sound - len(broken)
        console.print(
            f"{sound}/{len(checks)} tasks sound"
            + (f", {unproved} not runnable here" if unproved else "")
            + f"; {total:.1f} s of test runs, {workers} workers",
            highlight=False,
        )
        if broken or not sound:
            # Nothing proved (every task unavailable, or none selected) is no proof either.
            raise typer.Exit(1)

    @suite_app.command("prepare")
    def prepare(
        name: Annotated[str, typer.Argument(help="What to install: javascript (jest and Exercism's babel preset, from npm).")],
    ) -> None:
        """Install once, from its registry, what a benchmark track's tests need beyond its toolchain;
        grading links it in read-only and never downloads anything itself."""
        import subprocess

        from hitrate.evals.build_caches import NPM_PACKAGES, prepare as install

        console = _console()
        if name not in NPM_PACKAGES:
            console.print(f"[red]error:[/red] nothing to prepare called {name!r}; known: {', '.join(sorted(NPM_PACKAGES))}", highlight=False)
            raise typer.Exit(2)
        console.print(f"npm install {' '.join(NPM_PACKAGES[name])}", highlight=False, markup=False)
        try:
            folder = install(name)
        except subprocess.CalledProcessError as exc:
            console.print(f"error: npm install failed: {(exc.stderr or exc.stdout or '').strip()[-2000:]}", highlight=False, markup=False)
            raise typer.Exit(1) from exc
        except (OSError, subprocess.TimeoutExpired) as exc:
            console.print(f"error: {exc}", highlight=False, markup=False)
            raise typer.Exit(1) from exc
        console.print(f"installed in {folder}", highlight=False, markup=False)

    app.add_typer(suite_app, name="suite")
