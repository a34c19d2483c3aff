"""Loading tasks and suites: the format, the pydantic model, and clear errors for bad folders."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from hitrate.evals.task import (
    Difficulty,
    SuiteFormatError,
    TaskFormatError,
    bundled_suite_path,
    load_suite,
    load_task,
    resolve_suite_path,
)


def test_loads_a_task_and_its_parts(make_task) -> None:
    task = load_task(make_task())
    assert task.id == "fix-add"
    assert task.spec.difficulty is Difficulty.easy
    assert task.spec.limits.max_steps == 5
    assert task.spec.tests.argv == ["tests"]
    assert task.test_ids == ["tests/test_mathx.py::test_add", "tests/test_mathx.py::test_mul"]
    assert task.instruction.startswith("Fix `add")
    assert (task.workspace_dir / "mathx.py").is_file()
    assert (task.solution_dir / "mathx.py").is_file()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: (d / "task.toml").unlink(), "missing task.toml"),
        (lambda d: (d / "task.toml").write_text("id = [", encoding="utf-8"), "not valid TOML"),
        (lambda d: _rewrite(d, 'difficulty = "easy"', 'difficulty = "trivial"'), "difficulty"),
        (lambda d: _rewrite(d, "max_steps = 5", "max_steps = 0"), "limits.max_steps"),
        (lambda d: _rewrite(d, 'id = "fix-add"', 'id = "other-id"'), "differs from the folder name"),
        (lambda d: _rewrite(d, 'id = "fix-add"', 'id = "Fix Add"'), "id"),
        (lambda d: _rewrite(d, 'title = "Fix add"', 'title = "Fix add"\nextra_field = 1'), "extra_field"),
        (lambda d: _rewrite(d, 'command = "pytest tests"', 'command = "make test"'), "must start with 'pytest'"),
        (lambda d: _rewrite(d, '["tests/test_mathx.py::test_add"]', "[]"), "fail_to_pass is empty"),
        (lambda d: _rewrite(d, '["tests/test_mathx.py::test_add"]', '["test_add"]'), "not a pytest node id"),
        (
            lambda d: _rewrite(d, '["tests/test_mathx.py::test_mul"]', '["tests/test_mathx.py::test_add"]'),
            "both fail_to_pass and pass_to_pass",
        ),
        (
            lambda d: _rewrite(d, '["tests/test_mathx.py::test_add"]', '["tests/test_gone.py::test_add"]'),
            "names a file that does not exist",
        ),
        (lambda d: (d / "instruction.md").write_text("  \n", encoding="utf-8"), "instruction.md"),
        (lambda d: shutil.rmtree(d / "solution"), "solution/"),
        (lambda d: (d / "workspace" / "mathx.py").unlink(), "workspace/"),
        (lambda d: (d / "workspace" / "tests").mkdir(), "workspace/tests"),
    ],
)
def test_malformed_tasks_are_refused_with_a_clear_message(make_task, edit, message: str) -> None:
    task_dir = make_task()
    edit(task_dir)
    with pytest.raises(TaskFormatError) as info:
        load_task(task_dir)
    assert message in str(info.value)
    assert str(task_dir) in str(info.value)


def _rewrite(task_dir: Path, old: str, new: str) -> None:
    path = task_dir / "task.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_a_suite_lists_every_malformed_task(make_task) -> None:
    make_task("good-one")
    bad_a = make_task("bad-a")
    bad_b = make_task("bad-b")
    (bad_a / "task.toml").unlink()
    shutil.rmtree(bad_b / "tests")
    with pytest.raises(SuiteFormatError) as info:
        load_suite(bad_a.parent)
    assert [e.task_dir.name for e in info.value.errors] == ["bad-a", "bad-b"]
    assert "2 malformed task(s)" in str(info.value)


def test_suite_skips_hidden_folders_and_files(make_task) -> None:
    task_dir = make_task()
    suite_dir = task_dir.parent
    (suite_dir / "README.md").write_text("about this suite\n", encoding="utf-8")
    (suite_dir / "_drafts").mkdir()
    suite = load_suite(suite_dir)
    assert [t.id for t in suite.tasks] == ["fix-add"]
    assert suite.task("fix-add").root == task_dir
    with pytest.raises(KeyError, match="no task"):
        suite.task("nope")
    with pytest.raises(KeyError, match="nope"):
        suite.select(["fix-add", "nope"])


def test_empty_or_missing_suite_folder(tmp_path: Path) -> None:
    with pytest.raises(SuiteFormatError, match="no task folders"):
        load_suite(tmp_path)
    with pytest.raises(SuiteFormatError, match="not a folder"):
        load_suite(tmp_path / "missing")


def test_resolve_suite_path(tmp_path: Path) -> None:
    assert resolve_suite_path(None) == bundled_suite_path()
    assert resolve_suite_path("basic") == bundled_suite_path("basic")
    assert resolve_suite_path(str(tmp_path)) == tmp_path
    with pytest.raises(FileNotFoundError, match="neither a folder nor a bundled suite"):
        resolve_suite_path("no-such-suite")
    with pytest.raises(FileNotFoundError, match="bundled suites: .*basic"):
        bundled_suite_path("no-such-suite")


def test_bundled_suite_shape() -> None:
    suite = load_suite(bundled_suite_path())
    assert len(suite.tasks) >= 24
    assert {t.spec.difficulty for t in suite.tasks} == set(Difficulty)
    tags = {tag for t in suite.tasks for tag in t.spec.tags}
    assert {"bugfix", "feature", "refactor"} <= tags
    file_counts = []
    for task in suite.tasks:
        # The work spans one to six files: the ones the reference solution writes.
        touched = [p for p in task.solution_dir.rglob("*") if p.is_file()]
        file_counts.append(len(touched))
        assert 1 <= len(touched) <= 6, task.id
        assert len(list(task.workspace_dir.rglob("*.py"))) <= 6, task.id
        # The instruction names every module the hidden tests import.
        for path in task.tests_dir.rglob("*.py"):
            for top in _imported_top_levels(path) - {"pytest", *__import__("sys").stdlib_module_names}:
                assert top in task.instruction, f"{task.id}: instruction never names {top}"
        assert not list(task.root.rglob("__pycache__")), task.id
    assert min(file_counts) == 1 and max(file_counts) >= 5


def test_bundled_suite_uses_the_standard_library_only() -> None:
    import sys

    allowed = set(sys.stdlib_module_names) | {"pytest"}
    suite = load_suite(bundled_suite_path())
    for task in suite.tasks:
        local = {p.stem for p in task.workspace_dir.rglob("*.py")} | {
            p.name for p in task.workspace_dir.iterdir() if p.is_dir()
        }
        local |= {p.stem for p in task.solution_dir.rglob("*.py")} | {
            p.name for p in task.solution_dir.iterdir() if p.is_dir()
        }
        for path in [*task.workspace_dir.rglob("*.py"), *task.solution_dir.rglob("*.py"), *task.tests_dir.rglob("*.py")]:
            for top in _imported_top_levels(path):
                assert top in allowed or top in local, f"{task.id}: {path.name} imports {top}"


def _imported_top_levels(path: Path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_repo_pytest_does_not_collect_task_tests() -> None:
    # Task tests run only inside grading folders; the repository's own run must stay in tests/.
    root = Path(__file__).resolve().parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    testpaths = config["tool"]["pytest"]["ini_options"]["testpaths"]
    assert all(not (root / p).resolve().is_relative_to(root / "evals") for p in testpaths)
    assert not list((root / "evals").glob("conftest.py"))
