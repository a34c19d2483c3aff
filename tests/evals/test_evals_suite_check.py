"""`check_task` / `check_tasks`: a task is sound only if its tests really separate workspace and solution."""

from __future__ import annotations

import pytest

from hitrate.evals.suite_check import check_task, check_tasks
from hitrate.evals.task import bundled_suite_path, load_suite, load_task

from evals_task_factory import BUGGY, FIXED, TESTS


def test_a_sound_task_passes_the_check(make_task) -> None:
    check = check_task(load_task(make_task()))
    assert check.ok, check.problems
    assert not check.on_workspace.resolved and check.with_solution.resolved


def test_f2p_that_already_passes_is_reported(make_task) -> None:
    check = check_task(load_task(make_task(workspace={"mathx.py": FIXED})))
    assert check.problems == ["fail_to_pass test already passes on workspace/: tests/test_mathx.py::test_add"]


def test_p2p_that_fails_on_workspace_is_reported(make_task) -> None:
    broken = BUGGY.replace("return a * b", "return a ** b")
    check = check_task(load_task(make_task(workspace={"mathx.py": broken})))
    assert check.problems == ["pass_to_pass test is failed on workspace/: tests/test_mathx.py::test_mul"]


def test_solution_that_does_not_pass_is_reported(make_task) -> None:
    check = check_task(load_task(make_task(solution={"notes.txt": "nothing fixed\n"})))
    assert check.problems == ["test is failed with solution/: tests/test_mathx.py::test_add"]


def test_unlisted_and_missing_tests_are_reported(make_task) -> None:
    tests = {"test_mathx.py": TESTS + "\n\ndef test_unlisted():\n    pass\n"}
    check = check_task(
        load_task(make_task(tests=tests, p2p=["tests/test_mathx.py::test_mul", "tests/test_mathx.py::test_renamed"]))
    )
    assert "test is missing with solution/: tests/test_mathx.py::test_renamed" in check.problems
    assert "pass_to_pass test is missing on workspace/: tests/test_mathx.py::test_renamed" in check.problems
    assert any("neither fail_to_pass nor pass_to_pass: tests.test_mathx::test_unlisted" in p for p in check.problems)


def test_a_run_that_cannot_grade_is_reported(make_task) -> None:
    check = check_task(load_task(make_task(command="pytest --no-such-option tests")))
    assert check.problems[0].startswith("tests could not run on workspace/: pytest exited with status 4")


def test_check_tasks_keeps_input_order_and_reports_progress(make_task) -> None:
    tasks = [load_task(make_task(name)) for name in ("task-b", "task-a", "task-c")]
    seen: list[str] = []
    checks = check_tasks(tasks, workers=3, on_done=lambda c: seen.append(c.task_id))
    assert [c.task_id for c in checks] == ["task-b", "task-a", "task-c"]
    assert sorted(seen) == ["task-a", "task-b", "task-c"]
    with pytest.raises(ValueError, match="workers"):
        check_tasks(tasks, workers=0)


@pytest.mark.slow
def test_every_bundled_task_is_sound() -> None:
    suite = load_suite(bundled_suite_path())
    checks = check_tasks(suite.tasks, workers=4)
    broken = {c.task_id: c.problems for c in checks if not c.ok}
    assert not broken
    assert len(checks) >= 24
    for check in checks:
        # Each task's tests stay small: well under the 10 s budget per run.
        assert check.with_solution.duration_s < 10, check.task_id
