"""Grade a task's workspace with its hidden tests.

Grading never touches the workspace it is given: it copies it into a fresh folder, optionally
overlays files (the suite check overlays solution/), puts the hidden tests in place, and runs the
task's pytest command with this interpreter. pytest is isolated from whatever repository hitrate
runs in: its own config file, rootdir, no cache, no auto-loaded plugins, no inherited PYTHONPATH.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from hitrate.evals.junit import JunitKey, TestOutcome, match_outcomes, parse_junit
from hitrate.evals.task import Task

OUTPUT_TAIL_CHARS = 8000
_COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
# pytest exit codes that mean the run itself broke (internal error, usage error), not the code under test.
_INFRA_EXIT_CODES = {3, 4}
# Environment variables that would let the surrounding project leak into the graded run.
_SCRUBBED_ENV = ("PYTHONPATH", "PYTHONSTARTUP", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSAFEPATH")


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
    work_dir = root / "work"
    config_path = root / "pytest.ini"
    junit_path = root / "junit.xml"
    prepare_grading_dir(task, source, work_dir, overlay)
    _write_config(config_path, work_dir)
    limit = timeout_s if timeout_s is not None else task.spec.tests.timeout_s
    # -P: the workspace is not put on sys.path before pytest starts, so a file the agent wrote
    # (say, pytest.py) cannot stand in for pytest itself; `pythonpath` adds it once pytest runs.
    argv = [
        sys.executable, "-P", "-m", "pytest", *task.spec.tests.argv,
        "-c", str(config_path), "--rootdir", str(work_dir),
        "-p", "no:cacheprovider", f"--junitxml={junit_path}",
        "--continue-on-collection-errors", "-q", "--tb=short", "--color=no",
    ]  # fmt: skip
    started = time.monotonic()
    exit_code, timed_out, output, launch_error = _run(argv, work_dir, limit)
    duration = time.monotonic() - started
    output = clean_test_output(output, root)

    infra_error = launch_error
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

    spec = task.spec.tests
    outcomes, unlisted = match_outcomes(task.test_ids, reported)
    f2p_passed = sum(outcomes[t] is TestOutcome.passed for t in spec.fail_to_pass)
    p2p_passed = sum(outcomes[t] is TestOutcome.passed for t in spec.pass_to_pass)
    resolved = (
        not timed_out
        and infra_error is None
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
    )


def _grading_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # plugins installed next to hitrate stay out
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONHASHSEED"] = "0"  # set iteration order is the same on every run
    env["NO_COLOR"] = "1"
    return env


def _run(argv: list[str], cwd: Path, timeout_s: float) -> tuple[int | None, bool, str, str | None]:
    """Run argv in its own process group; returns (exit code, timed out, output, launch error)."""
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=_grading_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return None, False, "", f"could not start pytest: {exc}"
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, False, out.decode("utf-8", errors="replace"), None
    except subprocess.TimeoutExpired:
        # Kill the whole group: code under test may have started children of its own.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            # A child that left the process group still holds the pipe; give up on its output.
            proc.kill()
            out = b""
        return None, True, out.decode("utf-8", errors="replace"), None


_TIMING = re.compile(r"\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d\d:\d\d\))?")


def clean_test_output(text: str, grading_root: Path) -> str:
    """Mask the grading folder's path and run timings, so the same failure prints the same text."""
    for root in {str(grading_root), str(Path(grading_root).resolve())}:
        text = text.replace(str(Path(root) / "work"), "<workspace>").replace(root, "<grading>")
    return _TIMING.sub("in <time>", text)
