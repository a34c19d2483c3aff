"""Grade a task's workspace with its hidden tests.

Grading never touches the workspace it is given: it copies it into a fresh folder, optionally
overlays files (the suite check overlays solution/), puts a fresh copy of the hidden tests in place,
and runs the task's pytest command with this interpreter. pytest is isolated from whatever
repository hitrate runs in: its own config file, rootdir, no cache, no auto-loaded plugins.

The code under test is the agent's, so the run is treated as hostile: it runs in the OS sandbox the
shell uses (read-only system, no network, its own PID namespace, the task's originals hidden, an
allowlisted environment without API keys), its output is kept within a cap, and a guard plugin
(`grade_guard`) reports whether pytest's own code was rewritten; a rewritten run never passes.
Changes the agent made to tests, conftests, pytest's files or the grader are listed in the result
(`suspicious_changes`) for the report, whatever the verdict.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

from hitrate.evals import grade_guard
from hitrate.evals.junit import JunitKey, TestOutcome, display_id, junit_key, match_outcomes, parse_junit
from hitrate.evals.reward_hacking import suspicious_changes
from hitrate.evals.task import Task
from hitrate.evals.verdict_channel import ChannelVerdict, VerdictChannel, read_verdict
from hitrate.tools.confine import ConfinementPolicy, allowed_env, detect, sandboxed_argv, tree_limits
from hitrate.tools.shell import run_command

OUTPUT_TAIL_CHARS = 8000
# What grading keeps of pytest's output while it runs (its beginning and end): a test that prints
# hundreds of megabytes cannot grow the runner.
OUTPUT_CAPTURE_BYTES = 256 * 1024
_COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
# pytest exit codes that mean the run itself broke (internal error, usage error), not the code under test.
_INFRA_EXIT_CODES = {3, 4}
_GUARD_MODULE = "hitrate_grade_guard"


class GradeResult(BaseModel):
    """The outcome of one run of a task's hidden tests."""

    task_id: str
    resolved: bool
    """Every fail-to-pass and every pass-to-pass test passed."""
    outcomes: dict[str, TestOutcome]
    """Outcome of every listed test, keyed by node id (F2P first, then P2P)."""
    unlisted: dict[str, TestOutcome]
    """Report entries that match no listed test (extra tests, collection errors)."""
    f2p_passed: int
    f2p_total: int
    p2p_passed: int
    p2p_total: int
    exit_code: int | None
    """pytest's exit status; None when it was killed or never started."""
    timed_out: bool
    infra_error: str | None
    """Why the run could not produce a verdict (no report, pytest internal error); None if it could."""
    duration_s: float
    output: str
    """Tail of pytest's output, with the grading folder's path and timings masked."""
    tampering: list[str] = Field(default_factory=list)
    """What the guard found rewritten in pytest (or why it could not tell); non-empty never resolves."""
    suspicious_changes: list[str] = Field(default_factory=list)
    """Files the agent changed that can sway grading (tests, conftest.py, pytest's files, the grader)."""
    confined: bool = False
    """Whether the tests ran inside the OS sandbox."""

    @classmethod
    def one_verdict(cls, task_id: str, test_id: str, outcome: TestOutcome, **fields: object) -> "GradeResult":
        """The result of a grader with one verdict (a test command's exit status, a reward): it
        is the task's only fail-to-pass test, and it resolves the task when it passed (and no
        infra_error says the verdict is not one)."""
        passed = outcome is TestOutcome.passed
        return cls(
            task_id=task_id, resolved=passed and not fields.get("infra_error"), outcomes={test_id: outcome}, unlisted={},
            f2p_passed=int(passed), f2p_total=1, p2p_passed=0, p2p_total=0, **fields,
        )  # fmt: skip


def grade(
    task: Task,
    workspace: Path | None = None,
    *,
    overlay: Path | None = None,
    timeout_s: float | None = None,
    work_root: Path | None = None,
) -> GradeResult:
    """Grade `workspace` (default: the task's own workspace/) with the task's hidden tests.

    `overlay` is a folder whose files are copied over the workspace copy before the tests go in.
    `work_root` keeps the grading folder (it must not exist yet); by default a temporary folder is
    used and removed afterwards.
    """
    source = Path(workspace) if workspace is not None else task.workspace_dir
    if not source.is_dir():
        raise FileNotFoundError(f"workspace to grade is not a folder: {source}")
    if work_root is not None:
        Path(work_root).mkdir(parents=True, exist_ok=False)
        return _grade_in(task, source, overlay, timeout_s, Path(work_root))
    with tempfile.TemporaryDirectory(prefix=f"hitrate-grade-{task.id}-") as tmp:
        return _grade_in(task, source, overlay, timeout_s, Path(tmp))


def prepare_grading_dir(task: Task, workspace: Path, work_dir: Path, overlay: Path | None = None) -> None:
    """Build the folder the tests run in: workspace copy, conftests reset, overlay, hidden tests."""
    shutil.copytree(workspace, work_dir, symlinks=True, ignore=_COPY_IGNORE)
    _reset_conftests(task, work_dir)
    if overlay is not None:
        shutil.copytree(overlay, work_dir, symlinks=True, ignore=_COPY_IGNORE, dirs_exist_ok=True)
    # The hidden tests replace whatever the agent left under tests/, so edited or added test
    # files cannot change the verdict.
    tests_dest = work_dir / "tests"
    if tests_dest.is_symlink() or tests_dest.is_file():
        tests_dest.unlink()
    elif tests_dest.exists():
        shutil.rmtree(tests_dest)
    shutil.copytree(task.tests_dir, tests_dest, ignore=_COPY_IGNORE)


def _reset_conftests(task: Task, work_dir: Path) -> None:
    # A conftest.py can rewrite test outcomes, so only the task's own conftests may take part:
    # ones the workspace shipped are restored, any other is removed.
    for conftest in list(work_dir.rglob("conftest.py")):
        original = task.workspace_dir / conftest.relative_to(work_dir)
        conftest.unlink()
        if original.is_file():
            shutil.copyfile(original, conftest)


def _write_config(config_path: Path, work_dir: Path) -> None:
    # `pythonpath` puts the workspace root on sys.path, as if the tests ran from it, without relying
    # on the import mode or on the current directory.
    config_path.write_text(
        "[pytest]\n"
        f"pythonpath = {work_dir}\n"
        "junit_family = xunit2\n"
        "console_output_style = classic\n",
        encoding="utf-8",
    )


def _grade_in(task: Task, source: Path, overlay: Path | None, timeout_s: float | None, root: Path) -> GradeResult:
    if task.spec.grader is not None:
        from hitrate.evals.benchmark_grading import grade_benchmark  # it builds on this module

        return grade_benchmark(task, source, overlay, timeout_s, root)
    work_dir = root / "work"
    config_path = root / "pytest.ini"
    junit_path = root / "junit.xml"
    guard_dir = root / "guard"
    prepare_grading_dir(task, source, work_dir, overlay)
    _write_config(config_path, work_dir)
    guard_dir.mkdir()
    shutil.copyfile(grade_guard.__file__, guard_dir / f"{_GUARD_MODULE}.py")
    limit = timeout_s if timeout_s is not None else task.timeout_s
    # -P: the workspace is not put on sys.path before pytest starts, so a file the agent wrote
    # (say, pytest.py) cannot stand in for pytest itself; `pythonpath` adds it once pytest runs.
    argv = [
        sys.executable, "-P", "-m", "pytest", *_pytest_args(task),
        "-c", str(config_path), "--rootdir", str(work_dir),
        "-p", "no:cacheprovider", "-p", _GUARD_MODULE, f"--junitxml={junit_path}",
        "--continue-on-collection-errors", "-q", "--tb=short", "--color=no",
    ]  # fmt: skip
    # The guard's verdict comes through a pipe only pytest gets the write end of (never a file the
    # code under test could rewrite after the guard wrote it); the guard and the config are
    # read-only in the sandbox.
    channel = VerdictChannel()
    env = _grading_env(guard_dir, channel.write_fd)
    sandbox = detect()
    policy = ConfinementPolicy(hidden_paths=task.hidden_paths, read_only_paths=(str(guard_dir), str(config_path)))
    argv = sandboxed_argv(argv, sandbox, workspace=root, policy=policy, env=env, cwd=work_dir)
    started = time.monotonic()
    try:
        with tree_limits(sandbox, policy) as tree:  # processes and memory of the whole test run
            exit_code, timed_out, output, launch_error = _run([*tree.prefix, *argv], work_dir, limit, env,
                                                              pass_fds=(channel.write_fd,))  # fmt: skip
    finally:
        stream = channel.collect()
    duration = time.monotonic() - started
    output = clean_test_output(output, root)

    infra_error = launch_error
    tampering: list[str] = []
    reported: dict[JunitKey, TestOutcome] = {}
    if launch_error is None and not timed_out:
        if exit_code in _INFRA_EXIT_CODES:
            infra_error = f"pytest exited with status {exit_code} (internal or usage error)"
        elif not junit_path.is_file():
            infra_error = f"pytest wrote no JUnit report (exit status {exit_code})"
        else:
            try:
                reported = parse_junit(junit_path.read_text(encoding="utf-8", errors="replace"))
            except ValueError as exc:
                infra_error = str(exc)
        if infra_error is None:
            tampering = _check_verdict(read_verdict(stream, channel.overflowed), reported, exit_code)

    spec = task.spec.tests
    assert spec is not None
    outcomes, unlisted = match_outcomes(task.test_ids, reported)
    f2p_passed = sum(outcomes[t] is TestOutcome.passed for t in spec.fail_to_pass)
    p2p_passed = sum(outcomes[t] is TestOutcome.passed for t in spec.pass_to_pass)
    resolved = (
        not timed_out
        and infra_error is None
        and not tampering
        and f2p_passed == len(spec.fail_to_pass)
        and p2p_passed == len(spec.pass_to_pass)
    )
    return GradeResult(
        task_id=task.id,
        resolved=resolved,
        outcomes=outcomes,
        unlisted=unlisted,
        f2p_passed=f2p_passed,
        f2p_total=len(spec.fail_to_pass),
        p2p_passed=p2p_passed,
        p2p_total=len(spec.pass_to_pass),
        exit_code=exit_code,
        timed_out=timed_out,
        infra_error=infra_error,
        duration_s=round(duration, 3),
        output=output[-OUTPUT_TAIL_CHARS:],
        tampering=tampering,
        suspicious_changes=suspicious_changes(task.workspace_dir, source),
        confined=sandbox.confined,
    )


def _pytest_args(task: Task) -> list[str]:
    assert task.spec.tests is not None
    return task.spec.tests.argv


def _check_verdict(verdict: ChannelVerdict, reported: dict[JunitKey, TestOutcome], exit_code: int | None) -> list[str]:
    """What makes the run untrustworthy according to the guard's stream: an incomplete or forged
    stream, pytest's code rewritten, plugins registered by the code under test, a JUnit report that
    claims passes the guard did not see, or pytest's exit status 0 after failures it saw."""
    problems = list(verdict.problems)
    problems += [f"pytest internals changed during the run: {name}" for name in verdict.changed[:10]]
    problems += [f"a plugin was registered by the code under test: {plugin}" for plugin in verdict.plugins_added[:5]]
    seen = {junit_key(node): outcome for node, outcome in verdict.outcomes.items()}
    for key, outcome in reported.items():
        if outcome is TestOutcome.passed and seen.get(key) != "passed":
            problems.append(f"the JUnit report says {display_id(key)} passed; pytest reported {seen.get(key, 'nothing')}")
    if exit_code == 0 and verdict.saw_failure:
        problems.append("pytest's exit status is 0 although tests failed (the process was ended by the code under test)")
    return problems


def _grading_env(guard_dir: Path, verdict_fd: int) -> dict[str, str]:
    # An allowlist, like the shell's: API keys and the surrounding project's PYTHONPATH,
    # PYTEST_ADDOPTS or PYTEST_PLUGINS never reach the code under test.
    env, _withheld = allowed_env(os.environ)
    env["PYTHONPATH"] = str(guard_dir)  # only the guard plugin; the workspace comes via `pythonpath`
    env[grade_guard.VERDICT_FD_ENV] = str(verdict_fd)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # plugins installed next to hitrate stay out
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONHASHSEED"] = "0"  # set iteration order is the same on every run
    env["NO_COLOR"] = "1"
    env["TMPDIR"] = "/tmp"
    return env


def _run(
    argv: list[str], cwd: Path, timeout_s: float, env: dict[str, str], pass_fds: tuple[int, ...] = ()
) -> tuple[int | None, bool, str, str | None]:
    """Run argv with capped output; every process it starts dies with it.
    Returns (exit code, timed out, output, launch error)."""
    try:
        outcome = run_command(
            argv, cwd=str(cwd), env=env, timeout_s=timeout_s, max_output_bytes=OUTPUT_CAPTURE_BYTES, kill_grace_s=2.0,
            pass_fds=pass_fds,
        )
    except Exception as exc:  # run_command reports a failed start as ToolError
        return None, False, "", f"could not start pytest: {exc}"
    exit_code = None if outcome.timed_out else outcome.exit_code
    return exit_code, outcome.timed_out, outcome.output, None


_TIMING = re.compile(r"\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d\d:\d\d\))?")


def clean_test_output(text: str, grading_root: Path) -> str:
    """Mask the grading folder's path and run timings, so the same failure prints the same text."""
    for root in {str(grading_root), str(Path(grading_root).resolve())}:
        text = text.replace(str(Path(root) / "work"), "<workspace>").replace(root, "<grading>")
    return _TIMING.sub("in <time>", text)
