"""Prove that every task of a suite is sound, like SWE-bench's gold run or Harbor's oracle.

A task is sound when its fail-to-pass tests fail on workspace/, its pass-to-pass tests pass there,
every listed test passes once solution/ is overlaid, and no test runs that the task does not list.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from hitrate.evals.grading import GradeResult, grade
from hitrate.evals.junit import TestOutcome
from hitrate.evals.task import Task


class TaskCheck(BaseModel):
    """The verdict on one task: both grading runs and every fault found."""

    task_id: str
    difficulty: str
    on_workspace: GradeResult
    with_solution: GradeResult
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def duration_s(self) -> float:
        return self.on_workspace.duration_s + self.with_solution.duration_s


def _run_problems(label: str, result: GradeResult) -> list[str]:
    if result.timed_out:
        return [f"tests timed out on {label}"]
    if result.infra_error:
        return [f"tests could not run on {label}: {result.infra_error}"]
    if result.tampering:
        # Code that rewrote pytest during the run: its outcomes prove nothing.
        return [f"code under test rewrote pytest on {label}: {item}" for item in result.tampering]
    return []


def check_task(task: Task) -> TaskCheck:
    """Grade workspace/ alone and workspace/ + solution/, and list what makes the task unsound."""
    on_workspace = grade(task)
    with_solution = grade(task, overlay=task.solution_dir)
    problems = _run_problems("workspace/", on_workspace) + _run_problems("solution/", with_solution)
    if not problems:
        for node_id in task.fail_to_pass:
            if on_workspace.outcomes[node_id] is TestOutcome.passed:
                problems.append(f"fail_to_pass test already passes on workspace/: {node_id}")
        for node_id in task.pass_to_pass:
            outcome = on_workspace.outcomes[node_id]
            if outcome is not TestOutcome.passed:
                problems.append(f"pass_to_pass test is {outcome} on workspace/: {node_id}")
        for node_id, outcome in with_solution.outcomes.items():
            if outcome is not TestOutcome.passed:
                problems.append(f"test is {outcome} with solution/: {node_id}")
        for shown, outcome in with_solution.unlisted.items():
            problems.append(f"test ran ({outcome}) but is in neither fail_to_pass nor pass_to_pass: {shown}")
    return TaskCheck(
        task_id=task.id,
        difficulty=str(task.spec.difficulty),
        on_workspace=on_workspace,
        with_solution=with_solution,
        problems=problems,
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
