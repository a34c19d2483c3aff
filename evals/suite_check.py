"""Prove that every task of a suite is sound, like SWE-bench's gold run or Harbor's oracle.

A task is sound when its fail-to-pass tests fail on workspace/, its pass-to-pass tests pass there,
every listed test passes once solution/ is overlaid, and no test runs that the task does not list.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from hitrate.evals.grading import GradeResult, grade
from hitrate.evals.junit import TestOutcome
from hitrate.evals.requirements import oracle_unmet
from hitrate.evals.task import Task


class TaskCheck(BaseModel):
    """The verdict on one task: both grading runs and every fault found."""

    task_id: str
    difficulty: str
    on_workspace: GradeResult
    with_solution: GradeResult
    problems: list[str]
    not_runnable: str | None = None
    """Why the oracle cannot prove the task on this machine (the reference solution needs what is
    not here, e.g. a crate not available offline): neither sound nor broken."""

    @property
    def ok(self) -> bool:
        return not self.problems and self.not_runnable is None

    @property
    def verdict(self) -> str:
        return "not runnable here" if self.not_runnable is not None else ("ok" if not self.problems else "BROKEN")

    @property
    def duration_s(self) -> float:
        return self.on_workspace.duration_s + self.with_solution.duration_s


# The line of a test run's output that says why nothing could be collected (an import error).
_ERROR_LINE = re.compile(r"^E?\s*((?:\w+\.)*\w*(?:Error|Exception)\b:? .*)$", re.MULTILINE)


def _run_problems(label: str, result: GradeResult) -> list[str]:
    if result.timed_out:
        return [f"tests timed out on {label}"]
    if result.infra_error:
        return [f"tests could not run on {label}: {result.infra_error}"]
    if result.tampering:
        # Code that rewrote pytest during the run: its outcomes prove nothing.
        return [f"code under test rewrote pytest on {label}: {item}" for item in result.tampering]
    return []


def _none_ran(label: str, result: GradeResult) -> str:
    """One line for a run in which no listed test ran, with the error that stopped them."""
    found = _ERROR_LINE.findall(result.output)  # the last one is the cause of a traceback
    cause = found[-1].strip() if found else f"exit status {result.exit_code}"
    return f"none of the {len(result.outcomes)} listed tests ran on {label}: {cause}"


def _any_passed(result: GradeResult) -> bool:
    return any(o is TestOutcome.passed for o in result.outcomes.values())


def _collected_nothing(result: GradeResult) -> bool:
    """No listed test ran: all missing, or failed by a log parser's count after pytest could not
    collect the test files."""
    if _any_passed(result):
        return False
    return all(o is TestOutcome.missing for o in result.outcomes.values()) or bool(_COLLECTION_FAILED.search(result.output))


_COLLECTION_FAILED = re.compile(r"\d+ errors? during collection")


def _not_installed(result: GradeResult) -> str | None:
    """The import error of a run in which no listed test passed because a module is not installed
    here (the tests are missing, or failed by the log parser's count, when they cannot be collected)."""
    if not _collected_nothing(result):
        return None
    found = _MISSING_MODULE.search(result.output)
    return found.group(0).strip() if found else None


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named \S+")


def _fails_at_start(task: Task) -> str:
    return task.spec.tests.fails_at_start if task.spec.tests is not None else "every"


def _outcome_problems(task: Task, on_workspace: GradeResult, with_solution: GradeResult) -> list[str]:
    problems: list[str] = []
    collected_on_workspace = not _collected_nothing(on_workspace)
    if task.pass_to_pass and not collected_on_workspace:
        # Pass-to-pass tests that cannot even be collected say nothing about the task; the cause
        # (a missing dependency, an import error) is one line, not one per test.
        problems.append(_none_ran("workspace/", on_workspace))
    elif _fails_at_start(task) == "any":
        if all(on_workspace.outcomes[node_id] is TestOutcome.passed for node_id in task.fail_to_pass):
            problems.append("every fail_to_pass test already passes on workspace/: the task does not fail at the start")
    else:
        for node_id in task.fail_to_pass:
            if on_workspace.outcomes[node_id] is TestOutcome.passed:
                problems.append(f"fail_to_pass test already passes on workspace/: {node_id}")
    if collected_on_workspace:
        for node_id in task.pass_to_pass:
            outcome = on_workspace.outcomes[node_id]
            if outcome is not TestOutcome.passed:
                problems.append(f"pass_to_pass test is {outcome} on workspace/: {node_id}")
    if len(with_solution.outcomes) > 1 and _collected_nothing(with_solution):
        problems.append(_none_ran("solution/", with_solution))
    else:
        for node_id, outcome in with_solution.outcomes.items():
            if outcome is not TestOutcome.passed:
                problems.append(f"test is {outcome} with solution/: {node_id}")
    for shown, outcome in with_solution.unlisted.items():
        problems.append(f"test ran ({outcome}) but is in neither fail_to_pass nor pass_to_pass: {shown}")
    return problems


def check_task(task: Task) -> TaskCheck:
    """Grade workspace/ alone and workspace/ + solution/, and list what makes the task unsound."""
    on_workspace = grade(task)
    blocker = oracle_unmet(task.spec.grader)
    if blocker is not None:
        # The reference cannot run here: its run would only show the missing piece.
        skipped = GradeResult(
            task_id=task.id, resolved=False, outcomes={t: TestOutcome.missing for t in task.test_ids}, unlisted={},
            f2p_passed=0, f2p_total=len(task.fail_to_pass), p2p_passed=0, p2p_total=len(task.pass_to_pass),
            exit_code=None, timed_out=False, infra_error=f"not run: {blocker}", duration_s=0.0, output="",
        )  # fmt: skip
        problems = _run_problems("workspace/", on_workspace)
        return TaskCheck(task_id=task.id, difficulty=str(task.spec.difficulty), on_workspace=on_workspace,
                         with_solution=skipped, problems=problems, not_runnable=blocker)  # fmt: skip
    with_solution = grade(task, overlay=task.solution_dir)
    problems = _run_problems("workspace/", on_workspace) + _run_problems("solution/", with_solution)
    not_runnable = None
    if not problems and (missing := _not_installed(with_solution)) is not None:
        # Even the reference cannot be tested: the tests need a module this machine lacks.
        not_runnable = f"its tests need what is not installed here ({missing})"
    elif not problems:
        problems = _outcome_problems(task, on_workspace, with_solution)
    return TaskCheck(
        task_id=task.id,
        difficulty=str(task.spec.difficulty),
        on_workspace=on_workspace,
        with_solution=with_solution,
        problems=problems,
        not_runnable=not_runnable,
    )


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def check_tasks(
    tasks: list[Task],
    workers: int | None = None,
    on_done: Callable[[TaskCheck], None] | None = None,
) -> list[TaskCheck]:
    """Check tasks in parallel (each check runs pytest in subprocesses); results in input order."""
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    count = workers or default_workers()

    def run_one(task: Task) -> TaskCheck:
        result = check_task(task)
        if on_done is not None:
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="suite-check") as pool:
        return list(pool.map(run_one, tasks))
