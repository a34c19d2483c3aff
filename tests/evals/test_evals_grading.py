"""Grading: a fresh copy, hidden tests put in place, pytest run in isolation, JUnit parsed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hitrate.evals.grading import clean_test_output, grade
from hitrate.evals.junit import TestOutcome
from hitrate.evals.task import load_task

from evals_task_factory import FIXED, TESTS


def test_workspace_fails_and_solution_resolves(make_task) -> None:
    task = load_task(make_task())
    before = grade(task)
    assert before.resolved is False
    assert before.outcomes == {
        "tests/test_mathx.py::test_add": TestOutcome.failed,
        "tests/test_mathx.py::test_mul": TestOutcome.passed,
    }
    assert (before.f2p_passed, before.f2p_total, before.p2p_passed, before.p2p_total) == (0, 1, 1, 1)
    assert before.exit_code == 1 and before.infra_error is None and not before.timed_out
    assert "assert -1 == 5" in before.output

    after = grade(task, overlay=task.solution_dir)
    assert after.resolved is True
    assert (after.f2p_passed, after.p2p_passed) == (1, 1)
    assert after.exit_code == 0 and after.unlisted == {}


def test_grading_never_touches_the_graded_folder(make_task, tmp_path: Path) -> None:
    task = load_task(make_task())
    agent_dir = tmp_path / "agent"
    shutil.copytree(task.workspace_dir, agent_dir)
    (agent_dir / "mathx.py").write_text(FIXED, encoding="utf-8")
    snapshot = sorted(p.relative_to(agent_dir) for p in agent_dir.rglob("*"))
    result = grade(task, agent_dir)
    assert result.resolved
    assert sorted(p.relative_to(agent_dir) for p in agent_dir.rglob("*")) == snapshot
    assert not (agent_dir / "tests").exists()


def test_agent_edits_to_tests_and_conftests_do_not_count(make_task, tmp_path: Path) -> None:
    task = load_task(make_task())
    agent_dir = tmp_path / "agent"
    shutil.copytree(task.workspace_dir, agent_dir)
    # The agent leaves the bug, weakens the test, and plants a conftest that forces passes.
    (agent_dir / "tests").mkdir()
    (agent_dir / "tests" / "test_mathx.py").write_text("def test_add():\n    pass\n", encoding="utf-8")
    (agent_dir / "tests" / "test_extra.py").write_text("def test_extra():\n    pass\n", encoding="utf-8")
    (agent_dir / "conftest.py").write_text(
        "import pytest\n\n"
        "@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n",
        encoding="utf-8",
    )
    # A module named like pytest itself must not replace the test runner.
    (agent_dir / "pytest.py").write_text("raise SystemExit(0)\n", encoding="utf-8")
    result = grade(task, agent_dir)
    assert result.outcomes["tests/test_mathx.py::test_add"] is TestOutcome.failed
    assert result.resolved is False
    assert result.unlisted == {}


def test_task_conftest_is_restored_not_removed(make_task, tmp_path: Path) -> None:
    conftest = "import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n"
    tests = {"test_mathx.py": "from mathx import add\n\n\ndef test_add(two):\n    assert add(two, 3) == 5\n"}
    task = load_task(
        make_task(workspace={"mathx.py": FIXED, "conftest.py": conftest}, tests=tests, p2p=[])
    )
    agent_dir = tmp_path / "agent"
    shutil.copytree(task.workspace_dir, agent_dir)
    (agent_dir / "conftest.py").write_text("", encoding="utf-8")  # the agent broke the fixture
    assert grade(task, agent_dir).resolved is True


def test_collection_error_in_one_file_does_not_hide_the_others(make_task) -> None:
    tests = {"test_mathx.py": TESTS, "test_broken.py": "import no_such_module\n\n\ndef test_x():\n    pass\n"}
    task = load_task(make_task(tests=tests))
    result = grade(task, overlay=task.solution_dir)
    assert result.resolved is True
    assert result.unlisted == {"tests.test_broken": TestOutcome.error}


def test_parametrized_ids_aggregate_to_the_worst_case(make_task) -> None:
    tests = {
        "test_mathx.py": "import pytest\nfrom mathx import add\n\n\n"
        "@pytest.mark.parametrize('a', [0, 1])\n"
        "def test_add(a):\n    assert add(a, 1) == a + 1\n",
    }
    task = load_task(make_task(tests=tests, p2p=[]))
    # add(0, 1) == -1 fails, add(1, 1) == 0 fails: both cases of the buggy add fail.
    assert grade(task).outcomes["tests/test_mathx.py::test_add"] is TestOutcome.failed
    assert grade(task, overlay=task.solution_dir).resolved is True


def test_timeout_kills_the_run(make_task) -> None:
    tests = {"test_mathx.py": TESTS + "\n\ndef test_hang():\n    import time\n    time.sleep(60)\n"}
    task = load_task(make_task(tests=tests, p2p=["tests/test_mathx.py::test_mul", "tests/test_mathx.py::test_hang"]))
    result = grade(task, overlay=task.solution_dir, timeout_s=2)
    assert result.timed_out is True
    assert result.resolved is False
    assert result.exit_code is None
    assert result.duration_s < 30


def test_pytest_usage_error_is_an_infra_error(make_task) -> None:
    task = load_task(make_task(command="pytest --no-such-option tests"))
    result = grade(task, overlay=task.solution_dir)
    assert result.resolved is False
    assert result.infra_error is not None and "status 4" in result.infra_error
    assert set(result.outcomes.values()) == {TestOutcome.missing}


def test_run_is_isolated_from_the_surrounding_project(make_task, monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings that would change any pytest run started from this repository must not reach grading.
    monkeypatch.setenv("PYTEST_ADDOPTS", "--definitely-not-an-option")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    probe = (
        "import os, sys\nfrom pathlib import Path\n\n\n"
        "def test_add(request):\n"
        "    root = Path.cwd()\n"
        "    assert request.config.rootpath == root\n"
        "    assert request.config.inipath == root.parent / 'pytest.ini'\n"
        "    assert not request.config.pluginmanager.has_plugin('asyncio')\n"
        "    assert not request.config.pluginmanager.has_plugin('cacheprovider')\n"
        "    assert os.environ.get('PYTHONPATH') is None\n"
        "    assert str(root) in sys.path\n"
        "    import mathx\n"
        "    assert Path(mathx.__file__).parent == root\n"
    )
    task = load_task(make_task(tests={"test_mathx.py": probe}, p2p=[]))
    result = grade(task)
    assert result.resolved, result.output


def test_work_root_keeps_the_grading_folder(make_task, tmp_path: Path) -> None:
    task = load_task(make_task())
    root = tmp_path / "graded"
    result = grade(task, overlay=task.solution_dir, work_root=root)
    assert result.resolved
    assert (root / "work" / "tests" / "test_mathx.py").is_file()
    assert (root / "junit.xml").is_file()
    with pytest.raises(FileExistsError):
        grade(task, work_root=root)


def test_missing_workspace_is_a_clear_error(make_task, tmp_path: Path) -> None:
    task = load_task(make_task())
    with pytest.raises(FileNotFoundError, match="not a folder"):
        grade(task, tmp_path / "nowhere")


def test_clean_test_output_masks_paths_and_timings(tmp_path: Path) -> None:
    text = f"{tmp_path}/work/mathx.py:2: AssertionError\n{tmp_path}/junit.xml\n1 failed in 0.42s\n2 passed in 12s (0:00:12)"
    assert clean_test_output(text, tmp_path) == (
        "<workspace>/mathx.py:2: AssertionError\n<grading>/junit.xml\n1 failed in <time>\n2 passed in <time>"
    )
