"""Published benchmarks as suites: Aider polyglot / Exercism, SWE-bench JSONL, Harbor task folders,
converted from the example instances in tests/fixtures/benchmarks and graded by their own rules."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from polyglot_layout import ENV as POLYGLOT_ENV
from polyglot_layout import PolyglotSample, copy_published, published_checkout, write_polyglot_layout
from runner_fakes import FakeRoutes, PrefixCacheBackend

from hitrate.evals import benchmark_grading, requirements
from hitrate.evals.benchmarks import BenchmarkError, canonical_suite, resolve_suite
from hitrate.evals.grading import grade
from hitrate.evals.junit import TestOutcome
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.evals.suite_check import check_tasks
from hitrate.evals.task import load_suite, load_task
from hitrate.evals.task_graders import CommandGrader
from hitrate.store.ledger import Ledger

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks"
POLYGLOT = FIXTURES / "aider-polyglot"
SWEBENCH = FIXTURES / "swebench" / "instances.jsonl"
SWEBENCH_REPOS = FIXTURES / "swebench" / "repos"
HARBOR = FIXTURES / "terminal-bench"


@pytest.fixture(autouse=True)
def suite_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HITRATE_SUITE_CACHE", str(tmp_path / "suite-cache"))
    return tmp_path / "suite-cache"


def _polyglot():
    return load_suite(resolve_suite(f"aider-polyglot:{POLYGLOT}"))


def _swebench():
    return load_suite(resolve_suite(f"swebench:{SWEBENCH}", repos=str(SWEBENCH_REPOS)))


# ---- Aider polyglot / Exercism ----------------------------------------------------------------


def test_exercises_become_tasks_with_the_benchmarks_prompt_and_hidden_tests():
    suite = _polyglot()
    ids = {t.id for t in suite.tasks} | set(suite.unavailable)
    assert ids == {"python-leap", "python-raindrops", "rust-reverse-string", "go-leap"}
    leap = suite.task("python-leap")
    text = leap.instruction
    # introduction + instructions (+ append), then what Aider's benchmark adds, naming the files.
    assert text.index("A leap year has one extra day") < text.index("Write `leap_year(year)`")
    assert "change these files: leap.py" in text and "standard library" in text
    assert "Return a `str` in every case." in suite.task("python-raindrops").instruction
    # The stub is the workspace; the tests, .meta and .docs are not in it.
    assert sorted(p.name for p in leap.workspace_dir.rglob("*")) == ["leap.py"]
    assert (leap.solution_dir / "leap.py").read_text() == (POLYGLOT / "python/exercises/practice/leap/.meta/example.py").read_text()
    assert leap.fail_to_pass == [f"tests/leap_test.py::LeapTest::{name}" for name in (
        "test_year_not_divisible_by_4_is_common", "test_year_divisible_by_4_not_by_100_is_leap",
        "test_year_divisible_by_100_not_by_400_is_common", "test_year_divisible_by_400_is_leap")]  # fmt: skip
    assert leap.spec.source.benchmark == "aider-polyglot" and str(POLYGLOT) in leap.hidden_paths
    # A non-Python track keeps its test files at their own paths and the track's command.
    rust = load_task(suite.root / "rust-reverse-string")
    assert isinstance(rust.spec.grader, CommandGrader)
    assert rust.spec.grader.command[:2] == ["cargo", "test"] and "--include-ignored" in rust.spec.grader.command
    assert rust.spec.grader.test_files == ["tests/reverse-string.rs"]
    assert (rust.solution_dir / "src" / "lib.rs").is_file() and not (rust.workspace_dir / "tests").exists()


def test_a_track_without_its_toolchain_is_unavailable_with_the_reason(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(requirements.shutil, "which", lambda name: None if name in ("go", "cargo") else real_which(name))
    suite = _polyglot()
    assert suite.unavailable["go-leap"] == "the go toolchain is not on PATH (missing: go)"
    assert "missing: cargo" in suite.unavailable["rust-reverse-string"]
    assert {t.id for t in suite.tasks} == {"python-leap", "python-raindrops"}
    with pytest.raises(KeyError, match="cannot run here"):
        suite.select(["go-leap"])


def test_suite_check_proves_the_python_exercises():
    suite = _polyglot()
    checks = check_tasks(suite.select(["python-leap", "python-raindrops"]), workers=2)
    assert [c.problems for c in checks] == [[], []]
    assert all(c.on_workspace.f2p_passed == 0 and c.with_solution.resolved for c in checks)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="no Rust toolchain")
def test_rust_exercise_is_graded_by_cargo_test_with_the_original_tests(tmp_path):
    task = _polyglot().task("rust-reverse-string")
    [check] = check_tasks([task], workers=1)
    assert check.problems == [] and not check.on_workspace.resolved and check.with_solution.resolved
    # Rewriting the tests to pass does not help: the originals go back before the command runs.
    agent = tmp_path / "agent"
    shutil.copytree(task.workspace_dir, agent)
    (agent / "tests").mkdir()
    (agent / "tests" / "reverse-string.rs").write_text("#[test]\nfn nothing() {}\n")
    result = grade(task, agent)
    assert not result.resolved and result.suspicious_changes == ["edited hidden test file tests/reverse-string.rs"]


def test_a_command_grader_restores_the_tests_and_uses_the_exit_status(tmp_path):
    task_dir = tmp_path / "suite" / "sh-answer"
    (task_dir / "workspace").mkdir(parents=True)
    (task_dir / "workspace" / "answer.txt").write_text("41\n")
    (task_dir / "solution").mkdir()
    (task_dir / "solution" / "answer.txt").write_text("42\n")
    (task_dir / "tests").mkdir()
    (task_dir / "tests" / "check.sh").write_text('test "$(cat answer.txt)" = 42\n')
    (task_dir / "instruction.md").write_text("Put 42 in answer.txt.\n")
    (task_dir / "task.toml").write_text(
        'id = "sh-answer"\ntitle = "t"\ndifficulty = "easy"\n[limits]\nmax_steps = 3\nmax_cost_usd = 1\nmax_wall_s = 60\n'
        '[grader]\nkind = "command"\nlanguage = "sh"\ncommand = ["sh", "check.sh"]\nrequires = ["sh"]\ntest_files = ["check.sh"]\n'
    )
    task = load_task(task_dir)
    assert task.fail_to_pass == ["tests"] and task.pass_to_pass == []
    failing = grade(task)
    assert not failing.resolved and failing.outcomes == {"tests": TestOutcome.failed} and failing.exit_code == 1
    assert grade(task, overlay=task.solution_dir).resolved
    cheat = tmp_path / "cheat"
    shutil.copytree(task.workspace_dir, cheat)
    (cheat / "check.sh").write_text("exit 0\n")
    cheated = grade(task, cheat)
    assert not cheated.resolved and cheated.suspicious_changes == ["edited hidden test file check.sh"]


def test_conversion_is_cached_by_content(suite_cache, tmp_path):
    source = tmp_path / "track"
    shutil.copytree(POLYGLOT / "python", source)
    first = resolve_suite(f"aider-polyglot:{source}")
    assert resolve_suite(f"aider-polyglot:{source}") == first
    stub = source / "exercises/practice/leap/leap.py"
    stub.write_text(stub.read_text() + "\n# edited\n")
    second = resolve_suite(f"aider-polyglot:{source}")
    assert second != first and "# edited" in (second / "python-leap/workspace/leap.py").read_text()
    assert canonical_suite(f"aider-polyglot:{source}") == f"aider-polyglot:{source.resolve()}"
    with pytest.raises(BenchmarkError, match="no Exercism exercise"):
        resolve_suite(f"aider-polyglot:{tmp_path / 'suite-cache'}")


# ---- SWE-bench --------------------------------------------------------------------------------


def test_swebench_instances_become_tasks_at_their_base_commit():
    suite = _swebench()
    assert [t.id for t in suite.tasks] == ["hitrate-fixtures-tinycalc-1", "hitrate-fixtures-tinycalc-2"]
    task = suite.task("hitrate-fixtures-tinycalc-1")
    grader = task.spec.grader
    instance = json.loads(SWEBENCH.read_text().splitlines()[0])
    assert grader.instance_id == instance["instance_id"] and grader.repo == "hitrate-fixtures/tinycalc"
    assert grader.fail_to_pass == json.loads(instance["FAIL_TO_PASS"])
    assert grader.pass_to_pass == json.loads(instance["PASS_TO_PASS"])
    assert grader.test_files == ["tests/test_stats.py"] and grader.local_blocker is None
    assert task.instruction.startswith("median() is wrong for an even number of values")
    # The workspace is the repository at base_commit: no history, not the fix, not the new test.
    assert not (task.workspace_dir / ".git").exists()
    assert "len(ordered) % 2" not in (task.workspace_dir / "tinycalc/stats.py").read_text()
    assert "even_count" not in (task.workspace_dir / "tests/test_stats.py").read_text()
    assert sorted(p.relative_to(task.solution_dir).as_posix() for p in task.solution_dir.rglob("*") if p.is_file()) == ["tinycalc/stats.py"]
    assert (task.tests_dir / "test.patch").read_text() == instance["test_patch"]
    assert str(SWEBENCH) in task.hidden_paths and str(SWEBENCH_REPOS / "hitrate-fixtures__tinycalc.bundle") in task.hidden_paths


@pytest.mark.parametrize("official", [True, False], ids=["swebench-parsers", "junit-fallback"])
def test_swebench_gold_passes_start_fails_and_test_edits_are_undone(official, monkeypatch, tmp_path):
    if official:
        pytest.importorskip("swebench.harness.grading")
    else:
        monkeypatch.setattr(benchmark_grading, "_official_grading", lambda: None)
    suite = _swebench()
    checks = check_tasks(suite.tasks, workers=2)
    assert [c.problems for c in checks] == [[], []]
    check = checks[0]
    assert check.with_solution.output.startswith("[graded by swebench]" if official else "[graded by hitrate-junit]")
    assert (check.on_workspace.f2p_passed, check.on_workspace.p2p_passed) == (0, 2)
    assert (check.with_solution.f2p_passed, check.with_solution.p2p_passed) == (1, 2)
    # An agent that "fixes" the failing test instead of the code: the test files go back to the
    # base commit and the test patch is applied again, so it still fails.
    task = suite.task("hitrate-fixtures-tinycalc-1")
    agent = tmp_path / "agent"
    shutil.copytree(task.workspace_dir, agent)
    (agent / "tests/test_stats.py").write_text("def test_median_of_even_count():\n    pass\n")
    result = grade(task, agent)
    assert not result.resolved and result.outcomes["tests/test_stats.py::test_median_of_even_count"] is TestOutcome.failed
    assert result.suspicious_changes == ["edited test file tests/test_stats.py"]


def test_swebench_missing_repository_and_malformed_lines(tmp_path):
    empty = tmp_path / "repos"
    empty.mkdir()
    suite = load_suite(resolve_suite(f"swebench:{SWEBENCH}", repos=str(empty)))
    assert suite.tasks == [] and suite.unavailable["hitrate-fixtures-tinycalc-2"] == f"no clone of hitrate-fixtures/tinycalc in {empty}"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SWEBENCH.read_text().splitlines()[0] + "\n" + json.dumps({"instance_id": "x"}) + "\n")
    with pytest.raises(BenchmarkError, match="instance 2 is malformed: repo: Field required; base_commit: Field required"):
        resolve_suite(f"swebench:{bad}", repos=str(SWEBENCH_REPOS))
    lone = tmp_path / "lone" / "one.jsonl"
    lone.parent.mkdir()
    lone.write_text(SWEBENCH.read_text().splitlines()[0] + "\n")
    with pytest.raises(BenchmarkError, match="give --repos DIR"):
        resolve_suite(f"swebench:{lone}")


def test_swebench_repository_with_missing_dependencies_is_unavailable(tmp_path):
    from hitrate.evals.benchmarks.swebench import SwebenchInstance, _local_blocker

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["pytest>=7", "no-such-dist-hitrate>=1"]\n')
    row = json.loads(SWEBENCH.read_text().splitlines()[0])
    assert _local_blocker(SwebenchInstance.model_validate(row), tmp_path) == (
        "its Python dependencies are not installed here (missing: no-such-dist-hitrate)"
    )
    django = SwebenchInstance.model_validate({**row, "repo": "django/django"})
    assert "runtests.py" in _local_blocker(django, tmp_path)


# ---- Terminal-Bench / Harbor ------------------------------------------------------------------


def test_harbor_tasks_convert_and_need_a_container_runtime(monkeypatch):
    monkeypatch.setattr(requirements, "container_runtime", lambda: (None, "docker: Cannot connect to the Docker daemon"))
    suite = load_suite(resolve_suite(f"terminal-bench:{HARBOR}"))
    assert suite.tasks == [] and set(suite.unavailable) == {"hello-file", "sum-column"}
    assert "no container runtime is reachable (docker: Cannot connect" in suite.unavailable["sum-column"]
    task = load_task(suite.root / "sum-column")
    assert task.spec.grader.verifier_timeout_s == 120 and task.spec.limits.max_wall_s == 600
    assert task.spec.difficulty == "medium" and "csv" in task.spec.tags
    assert (task.tests_dir / "test.sh").is_file() and (task.solution_dir / "solve.sh").is_file()
    assert (task.root / "environment" / "Dockerfile").is_file()


# ---- runs ---------------------------------------------------------------------------------------


def test_replayed_runs_of_the_examples_pass_and_record_what_could_not_run(tmp_path, monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(requirements.shutil, "which", lambda name: None if name == "go" else real_which(name))
    db = tmp_path / "runs.db"
    model = "openai-compat/fake@http://127.0.0.1:9/v1"
    runs = {}
    for spec, repos, tasks in (
        (f"aider-polyglot:{POLYGLOT}", None, ["python-leap", "python-raindrops"]),
        (f"swebench:{SWEBENCH}", str(SWEBENCH_REPOS), None),
    ):
        settings = EvalSettings(suite=canonical_suite(spec), repos=repos, model=model, policy="replay", task_ids=tasks)
        runs[spec.split(":")[0]] = run_eval(settings, db_path=db, workers=2, routes=FakeRoutes(PrefixCacheBackend()))
    assert all(run.status == "finished" for run in runs.values())
    assert [r.outcome for r in runs["swebench"].results] == ["pass", "pass"]
    assert [r.outcome for r in runs["aider-polyglot"].results] == ["pass", "pass"]
    assert runs["aider-polyglot"].unavailable["go-leap"].startswith("the go toolchain")
    with Ledger(db) as ledger:
        run = ledger.get_run(runs["aider-polyglot"].run_id)
        assert run.config["unavailable"] == runs["aider-polyglot"].unavailable
        assert run.config["settings"]["suite"] == f"aider-polyglot:{POLYGLOT}"
    # Resuming finds the same converted tasks and has nothing left to do.
    again = run_eval(None, db_path=db, resume=runs["swebench"].run_id, routes=FakeRoutes(PrefixCacheBackend()))
    assert again.results == [] and len(again.skipped) == 2


# ---- SWE-bench in the official image ------------------------------------------------------------


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_model_patch_turns_the_base_tree_into_the_workspace(tmp_path):
    from hitrate.evals.swebench_image import model_patch

    base, changed = tmp_path / "base", tmp_path / "changed"
    for rel, data in {"a.txt": b"one\ntwo\n", "pkg/b.py": b"x = 1\n", "blob.bin": bytes(range(256))}.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(data)
    shutil.copytree(base, changed)
    (changed / "a.txt").write_bytes(b"one\n2\n")
    (changed / "pkg/b.py").unlink()
    (changed / "new").mkdir()
    (changed / "new/c.py").write_bytes(b"print('c')\n")
    (changed / "blob.bin").write_bytes(bytes(reversed(range(256))))
    patch = model_patch(base, changed)
    replayed = tmp_path / "replayed"
    shutil.copytree(base, replayed)
    (tmp_path / "p.diff").write_text(patch)
    assert benchmark_grading.apply_patch(tmp_path / "p.diff", replayed) is None
    assert _tree(replayed) == _tree(changed)
    assert model_patch(base, base) == ""


def test_with_a_container_runtime_the_official_harness_grades_in_the_instance_image(tmp_path, monkeypatch):
    """No container runtime here: the official `run_instance` is stood in for by a function that
    checks what it is given (the instance's test spec, the workspace's diff) and answers the way
    the harness does (report.json entry, test_output.txt in its log folder)."""
    pytest.importorskip("docker")
    run_evaluation = pytest.importorskip("swebench.harness.run_evaluation")
    image = "swebench/sweb.eval.x86_64.hitrate-fixtures_1776_tinycalc-1:latest"
    rows = [json.loads(line) for line in SWEBENCH.read_text().splitlines()]
    rows[0].update(image=image, eval_script="#!/bin/bash\ncd /testbed\npytest -rA tests/test_stats.py\n", log_parser="parse_log_pytest", eval_type="pass_and_fail")
    jsonl = tmp_path / "with-images.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(requirements, "container_runtime", lambda: ("/usr/bin/docker", ""))
    monkeypatch.setattr("docker.from_env", lambda: "docker-client")
    suite = load_suite(resolve_suite(f"swebench:{jsonl}", repos=str(SWEBENCH_REPOS)))
    task = suite.task("hitrate-fixtures-tinycalc-1")
    seen = {}

    def run_instance(test_spec, pred, client, run_id, timeout=None, **_):
        seen.update(image=test_spec.image, script=test_spec.eval_script, f2p=test_spec.FAIL_TO_PASS, client=client)
        applied = Path(tempfile.mkdtemp(dir=tmp_path)) / "applied"
        shutil.copytree(task.workspace_dir, applied)
        (tmp_path / "model.diff").write_text(pred["model_patch"])
        assert not pred["model_patch"] or benchmark_grading.apply_patch(tmp_path / "model.diff", applied) is None
        fixed = (applied / "tinycalc/stats.py").read_text() == (task.solution_dir / "tinycalc/stats.py").read_text()
        log_dir = run_evaluation.RUN_EVALUATION_LOG_DIR / run_id / "hitrate" / pred["instance_id"]
        log_dir.mkdir(parents=True)
        (log_dir / "test_output.txt").write_text("PASSED tests/test_stats.py::test_median_of_even_count\n")
        f2p, p2p = test_spec.FAIL_TO_PASS, test_spec.PASS_TO_PASS
        status = {"FAIL_TO_PASS": {"success": f2p if fixed else [], "failure": [] if fixed else f2p},
                  "PASS_TO_PASS": {"success": p2p, "failure": []}}  # fmt: skip
        exists = bool(pred["model_patch"])
        entry = {"patch_is_None": False, "patch_exists": exists, "patch_successfully_applied": exists, "resolved": fixed, "tests_status": status}
        return pred["instance_id"], {pred["instance_id"]: entry}

    monkeypatch.setattr(run_evaluation, "run_instance", run_instance)
    solved = grade(task, overlay=task.solution_dir)
    assert solved.resolved and solved.output.startswith(f"[graded by swebench in {image}]")
    assert (solved.f2p_passed, solved.p2p_passed) == (1, 2)
    assert seen["image"] == image and "pytest -rA" in seen["script"] and seen["client"] == "docker-client"
    unsolved = grade(task)
    assert unsolved.infra_error is None, unsolved.infra_error
    assert not unsolved.resolved and unsolved.outcomes["tests/test_stats.py::test_median_of_even_count"] is TestOutcome.failed
    # Without a runtime the same instance is graded in the local sandbox, by the same rules.
    monkeypatch.setattr(requirements, "container_runtime", lambda: (None, "no daemon"))
    local = grade(task, overlay=task.solution_dir)
    assert local.resolved and local.output.startswith("[graded by swebench]")


def test_an_instance_blocked_locally_runs_only_in_its_official_image(monkeypatch):
    from hitrate.evals.task_graders import SwebenchGrader

    blocked = SwebenchGrader(instance_id="django__django-1", repo="django/django", test_files=["tests/t.py"], test_command=["-m", "pytest"],
                             fail_to_pass=["t"], local_blocker="django/django runs its tests with runtests.py")  # fmt: skip
    assert requirements.unmet(blocked).endswith("the instance names no official image and eval script to grade it in")
    with_image = blocked.model_copy(update={"image": "swebench/sweb.eval.x86_64.django_1776_django-1", "eval_script": "#!/bin/bash\n"})
    monkeypatch.setattr(requirements, "container_runtime", lambda: (None, "docker: no daemon"))
    assert requirements.unmet(with_image).endswith("and no container runtime is reachable for its official image (docker: no daemon)")
    monkeypatch.setattr(requirements, "container_runtime", lambda: ("/usr/bin/docker", ""))
    monkeypatch.setattr(requirements, "official_harness", lambda: False)
    assert "needs the swebench extra" in requirements.unmet(with_image)
    monkeypatch.setattr(requirements, "official_harness", lambda: True)
    assert requirements.unmet(with_image) is None and requirements.in_official_image(with_image)


def test_suite_cli_checks_a_benchmark_and_lists_what_cannot_run(monkeypatch, tmp_path):
    import typer
    from typer.testing import CliRunner

    from hitrate.evals.commands import eval as cli_eval
    from hitrate.evals.commands import suite as cli_suite

    app = typer.Typer()
    cli_suite.register(app)
    cli_eval.register(app)
    checked = CliRunner().invoke(app, ["suite", "check", f"swebench:{SWEBENCH}", "--repos", str(SWEBENCH_REPOS)])
    assert checked.exit_code == 0, checked.output
    assert "2/2 tasks sound" in checked.output and "hitrate-fixtures-tinycalc-1" in checked.output
    monkeypatch.setattr(requirements, "container_runtime", lambda: (None, "no daemon"))
    listed = CliRunner().invoke(app, ["suite", "list", f"terminal-bench:{HARBOR}"])
    assert listed.exit_code == 0 and "unavailable here: hello-file: a Terminal-Bench task runs in its environment/ container" in listed.output
    missing = CliRunner().invoke(app, ["suite", "list", "swebench:/no/such/file.jsonl"])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    wrong = CliRunner().invoke(app, ["eval", f"aider-polyglot:{POLYGLOT}", "--repos", str(SWEBENCH_REPOS), "--model", "openai-compat/x@http://127.0.0.1:9/v1",
                                     "--db", str(tmp_path / "runs.db")])  # fmt: skip
    assert wrong.exit_code == 2 and "--repos is for swebench" in " ".join(wrong.output.split())


# ---- Aider polyglot: what the published tracks need ----------------------------------------------
# Each check runs on small exercises written in the benchmark's layout, and, when HITRATE_POLYGLOT
# names a checkout of the published benchmark, on the published exercises that show the same thing.


@pytest.fixture(params=["written", "published"])
def polyglot(request, tmp_path_factory) -> PolyglotSample:
    if request.param == "written":
        return write_polyglot_layout(tmp_path_factory.mktemp("polyglot-layout"))
    checkout = published_checkout()
    if checkout is None:
        pytest.skip(f"{POLYGLOT_ENV} is not set: it names a checkout of the published polyglot benchmark to run these checks on")
    return copy_published(checkout, tmp_path_factory.mktemp("polyglot-published"))


def _layout_suite(sample: PolyglotSample):
    return load_suite(resolve_suite(f"aider-polyglot:{sample.root}"))


@pytest.mark.skipif(any(shutil.which(p) is None for p in ("cmake", "make", "g++")), reason="no C++ toolchain (cmake, make, g++)")
def test_cpp_exercise_is_graded_in_a_folder_named_after_it(polyglot):
    # Exercism's CMakeLists.txt builds `<folder name>_test.cpp`: in a folder named `work` the build
    # looked for work_test.cpp and every C++ exercise was broken.
    task = _layout_suite(polyglot).task(f"cpp-{polyglot.cpp}")
    assert task.spec.grader.grading_folder == polyglot.cpp
    [check] = check_tasks([task], workers=1)
    assert check.problems == [], check.with_solution.output
    assert not check.on_workspace.resolved and check.with_solution.resolved
    assert "All tests passed" in check.with_solution.output and f"in {polyglot.cpp_test_cases} test cases" in check.with_solution.output


def test_python_exercise_fails_at_the_start_as_a_whole_not_test_by_test(polyglot, tmp_path):
    # Some published stubs (dominoes') already pass some of their tests; Aider's rule asks only
    # that the exercise as a whole fails at the start.
    task = _layout_suite(polyglot).task(f"python-{polyglot.python}")
    assert task.spec.tests.fails_at_start == "any"
    [check] = check_tasks([task], workers=1)
    assert check.problems == [] and 0 < check.on_workspace.f2p_passed < check.on_workspace.f2p_total
    assert check.with_solution.resolved
    # A stub that passes every test is still no task.
    solved = tmp_path / "suite" / task.id
    shutil.copytree(task.root, solved)
    shutil.copyfile(task.solution_dir / polyglot.python_stub, solved / "workspace" / polyglot.python_stub)
    [again] = check_tasks([load_task(solved)], workers=1)
    assert again.problems == ["every fail_to_pass test already passes on workspace/: the task does not fail at the start"]


def test_rust_reference_dependencies_go_into_the_solutions_manifest(polyglot, tmp_path, monkeypatch):
    from hitrate.evals import crates

    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "cargo-home"))
    monkeypatch.setattr(crates, "DEBIAN_REGISTRY", tmp_path / "debian-registry")
    task = _layout_suite(polyglot).task(f"rust-{polyglot.rust}")
    grader = task.spec.grader
    assert (grader.crates, grader.oracle_crates) == ({}, polyglot.rust_oracle_crates)
    manifest = (task.solution_dir / "Cargo.toml").read_text()
    assert 'rand = "0.3.12"' in manifest and f'name = "{polyglot.rust}"' in manifest and polyglot.rust_lint in manifest
    assert "rand" not in (task.workspace_dir / "Cargo.toml").read_text()
    # Offline without the crate, the oracle cannot prove the task: not runnable here, not broken.
    assert requirements.oracle_unmet(grader) == "the reference solution needs crates not available offline here: rand 0.3.12"
    if shutil.which("cargo"):
        [check] = check_tasks([task], workers=1)
        assert check.verdict == "not runnable here" and check.problems == [] and not check.ok
        assert check.not_runnable == requirements.oracle_unmet(grader)
    # Debian's packaged rand is 0.8: no fit for "0.3.12" (Cargo's caret rule), so still not.
    (tmp_path / "debian-registry" / "rand-0.8.5").mkdir(parents=True)
    assert requirements.oracle_unmet(grader) is not None
    # Once cargo has a fitting version in its registry cache, it can.
    cached = tmp_path / "cargo-home" / "registry" / "cache" / "index.crates.io-6f17d22bba15001f"
    cached.mkdir(parents=True)
    (cached / "rand-0.3.23.crate").write_bytes(b"")
    assert requirements.oracle_unmet(grader) is None and crates.cargo_config({"rand": "0.3.12"}) is None
    # A crate the exercise's own manifest needs keeps the whole task from running...
    needs_time = grader.model_copy(update={"crates": {"time": "0.3", "rand": "0.8"}})
    assert requirements.unmet(needs_time) == "its Cargo.toml needs crates not available offline here: time 0.3"
    # ...until Debian's packaged crates have them all; grading then points cargo at them.
    (tmp_path / "debian-registry" / "time-0.3.9").mkdir()
    assert requirements.unmet(needs_time) is None
    assert f'directory = "{tmp_path / "debian-registry"}"' in crates.cargo_config(needs_time.crates)


def test_cargo_version_requirements_follow_the_caret_rule():
    from hitrate.evals.crates import fits

    assert fits("0.5", "0.5.9") and not fits("0.5", "0.10.3") and not fits("0.5", "0.4.9")
    assert fits("1.0", "1.0.69") and fits("1", "1.7.0") and not fits("1.0", "2.0.0")
    assert fits("0.2.16", "0.2.17") and not fits("0.2.16", "0.2.15") and fits("0.4.4", "0.4.4")
    assert fits("~3.37.1", "3.37.4") and not fits("~3.37.1", "3.38.0") and fits("=1.2.3", "1.2.3") and not fits("=1.2.3", "1.2.4")
    assert fits(">=1.2, <2", "1.9.0") and not fits(">=1.2, <2", "2.0.0") and fits("*", "0.0.1")
    assert fits("0.0.3", "0.0.3") and not fits("0.0.3", "0.0.4")


def test_a_cpp_exercise_that_needs_boost_is_unavailable_without_its_headers(polyglot, tmp_path, monkeypatch):
    from hitrate.evals.benchmarks.exercism import _boost_headers

    # gigasecond's and meetup's CMakeLists.txt, as published, ask for Boost's date_time.
    published = polyglot.exercise("cpp", polyglot.cpp) / "CMakeLists.txt"
    cmakelists = tmp_path / "CMakeLists.txt"
    cmakelists.write_text(published.read_text() + "\nset(Boost_USE_MULTITHREADED ON)\nfind_package(Boost 1.58 REQUIRED COMPONENTS date_time)\n")
    assert _boost_headers(cmakelists) == ["boost/date_time.hpp"]
    assert _boost_headers(published) == []
    grader = _layout_suite(polyglot).task(f"cpp-{polyglot.cpp}").spec.grader.model_copy(update={"headers": ["boost/date_time.hpp"]})
    real_missing_headers = requirements.missing_headers
    monkeypatch.setattr(requirements, "missing_headers", lambda headers: list(headers))
    assert requirements.unmet(grader) == "its build needs headers not installed here: boost/date_time.hpp"
    include = tmp_path / "include"
    (include / "boost").mkdir(parents=True)
    (include / "boost" / "date_time.hpp").write_text("")
    monkeypatch.setenv("CPATH", str(include))
    assert real_missing_headers(["boost/date_time.hpp", "boost/no_such_part.hpp"]) == ["boost/no_such_part.hpp"]


def test_javascript_exercises_need_their_test_packages_prepared_once(polyglot, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from hitrate.evals import build_caches

    prepared = build_caches.prepared("javascript")
    monkeypatch.setenv("HITRATE_BUILD_CACHE", str(tmp_path / "nothing-prepared"))
    simple = f"javascript-{polyglot.javascript}"
    suite = _layout_suite(polyglot)
    assert suite.unavailable[simple].startswith("the javascript track's test packages are not installed here (jest@^29.7.0")
    assert suite.unavailable[simple].endswith("run `hitrate suite prepare javascript` once")
    unknown = CliRunner().invoke(_cli(), ["suite", "prepare", "cobol"])
    assert unknown.exit_code == 2 and "nothing to prepare called 'cobol'; known: javascript" in unknown.output
    if prepared is None or shutil.which("node") is None:
        pytest.skip("jest not prepared here (hitrate suite prepare javascript) or no node")
    monkeypatch.setenv("HITRATE_BUILD_CACHE", str(prepared.parent.parent))
    suite = _layout_suite(polyglot)
    task = suite.task(simple)
    # A reference that starts worker threads (parallel-letter-frequency's): V8 reserves gigabytes
    # of address space for each, which a per-process RLIMIT_AS would refuse ("Fatal process OOM").
    # (The published one's "many small texts" case has jest's 5 s limit for dozens of workers: on a
    # busy machine it times out, so only the start of its workers is checked here.)
    checks = check_tasks([task, suite.task(f"javascript-{polyglot.javascript_workers}")], workers=2)
    assert checks[0].problems == [], checks[0].with_solution.output
    assert "Tests:" in checks[0].with_solution.output and " passed" in checks[0].with_solution.output
    workers = checks[1].with_solution.output
    assert "Failed to reserve virtual memory" not in workers and f"✓ {polyglot.javascript_worker_case}" in workers, workers
    # The shared packages are linked in, not copied; the agent's own node_modules does not count.
    agent = tmp_path / "agent"
    shutil.copytree(task.workspace_dir, agent)
    (agent / "node_modules" / "jest" / "bin").mkdir(parents=True)
    (agent / "node_modules" / "jest" / "bin" / "jest.js").write_text("process.exit(0)\n")
    assert not grade(task, agent).resolved


def test_java_exercises_run_on_debians_junit_with_every_test_switched_on(polyglot, tmp_path):
    from hitrate.evals.benchmarks.exercism import JUNIT_CONSOLE, TEST_JARS

    task = _layout_suite(polyglot).task(f"java-{polyglot.java}")
    grader = task.spec.grader
    exercise = polyglot.exercise("java", polyglot.java)
    published = (exercise / polyglot.java_test).read_text()
    hidden = (task.tests_dir / polyglot.java_test).read_text()
    assert published.count('@Disabled("Remove to run test")') >= polyglot.java_min_disabled and "@Disabled(" not in hidden
    assert hidden.count("@Test") == published.count("@Test")
    assert requirements.unmet(grader.model_copy(update={"files": ["/nonexistent/junit.jar"]})) == (
        "its test runner needs files not installed here: /nonexistent/junit.jar")
    # rest-api's build.gradle adds a library of its own (org.json): the offline runner has none.
    track = tmp_path / "java" / "exercises" / "practice"
    shutil.copytree(exercise, track / "rest-api")
    gradle = track / "rest-api" / "build.gradle"
    gradle.write_text(gradle.read_text().replace("dependencies {\n", 'dependencies {\n    implementation "org.json:json:20190722"\n\n'))
    assert load_suite(resolve_suite(f"aider-polyglot:{tmp_path}")).unavailable == {
        "java-rest-api": "its build.gradle needs org.json:json:20190722, which the offline Java runner (JUnit 5 and AssertJ) does not provide"}
    if any(shutil.which(p) is None for p in ("javac", "java")) or not all(Path(f).is_file() for f in (JUNIT_CONSOLE, *TEST_JARS)):
        pytest.skip("no JDK, or Debian's JUnit 5 / AssertJ jars (apt-get install junit5 libassertj-core-java)")
    [check] = check_tasks([task], workers=1)
    assert check.problems == [], check.with_solution.output
    assert "tests successful" in check.with_solution.output and "0 tests failed" in check.with_solution.output


def test_java_reference_helper_classes_are_copied_beside_the_solution(polyglot):
    from itertools import permutations

    from hitrate.evals.benchmarks.exercism import example_targets

    suite = _layout_suite(polyglot)
    task_dir = suite.root / f"java-{polyglot.java}"
    reference = polyglot.exercise("java", polyglot.java) / ".meta/src/reference/java"
    solution = task_dir / "solution" / "src/main/java"
    assert sorted(p.name for p in solution.iterdir()) == list(polyglot.java_reference)
    for name in polyglot.java_reference:
        assert (solution / name).read_text() == (reference / name).read_text()
    # The same files land in the same places whatever order config.json lists them in.
    solution_file = f"src/main/java/{polyglot.java_reference[-1]}"
    examples = [f".meta/src/reference/java/{n}" for n in polyglot.java_reference]
    placed = {tuple(sorted(example_targets(list(order), [solution_file]).items())) for order in permutations(examples)}
    assert len(placed) == 1
    assert example_targets([".meta/example.py"], ["leap.py"]) == {".meta/example.py": "leap.py"}
    assert example_targets([".meta/example.cpp", ".meta/example.h"], ["a.h", "a.cpp"]) == {".meta/example.cpp": "a.cpp", ".meta/example.h": "a.h"}
    with pytest.raises(ValueError, match="match no solution file"):
        example_targets([".meta/example.js"], ["src/lib.rs"])


def _cli():
    import typer

    from hitrate.evals.commands import suite as cli_suite

    app = typer.Typer()
    cli_suite.register(app)
    return app


def test_suite_check_selects_languages_and_samples_and_fails_when_it_proved_nothing(monkeypatch):
    from typer.testing import CliRunner

    app = _cli()
    checked = CliRunner().invoke(app, ["suite", "check", f"aider-polyglot:{POLYGLOT}", "--language", "python", "-j", "2"])
    assert checked.exit_code == 0, checked.output
    assert "2/2 tasks sound" in checked.output and "go-leap" not in checked.output and "rust-" not in checked.output
    sampled = CliRunner().invoke(app, ["suite", "check", f"aider-polyglot:{POLYGLOT}", "--language", "python", "--sample", "1", "--seed", "3"])
    assert sampled.exit_code == 0 and "1/1 tasks sound" in sampled.output
    monkeypatch.setattr(requirements, "container_runtime", lambda: (None, "no daemon"))
    nothing = CliRunner().invoke(app, ["suite", "check", f"terminal-bench:{HARBOR}"])
    assert nothing.exit_code == 1 and "0/0 tasks sound" in nothing.output


def test_show_output_is_titled_after_the_test_command(tmp_path):
    from typer.testing import CliRunner

    task_dir = tmp_path / "suite" / "sh-answer"
    for rel, text in {"workspace/answer.txt": "41\n", "solution/answer.txt": "41\n", "tests/check.sh": 'echo "got $(cat answer.txt)"; test "$(cat answer.txt)" = 42\n',
                      "instruction.md": "Put 42 in answer.txt.\n"}.items():  # fmt: skip
        (task_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (task_dir / rel).write_text(text)
    (task_dir / "task.toml").write_text(
        'id = "sh-answer"\ntitle = "t"\ndifficulty = "easy"\n[limits]\nmax_steps = 3\nmax_cost_usd = 1\nmax_wall_s = 60\n'
        '[grader]\nkind = "command"\nlanguage = "sh"\ncommand = ["sh", "check.sh"]\nrequires = ["sh"]\ntest_files = ["check.sh"]\n'
    )
    result = CliRunner().invoke(_cli(), ["suite", "check", str(tmp_path / "suite"), "--show-output"])
    assert result.exit_code == 1 and "test is failed with solution/: tests" in result.output
    assert "sh-answer: sh output on solution/" in result.output and "pytest output" not in result.output and "got 41" in result.output


# ---- SWE-bench: what a repository needs, and tests that cannot be collected ------------------------


def test_test_dependencies_are_read_from_every_place_python_projects_declare_them(tmp_path):
    from hitrate.evals.benchmarks.python_deps import missing_distributions

    # marshmallow's layout at the time of its SWE-bench instances: setup.py with a module constant.
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nEXTRAS_REQUIRE = {'reco': ['simplejson-hitrate-absent'], 'tests': ['pytest', 'pytz-hitrate-absent'],\n"
        "                  'lint': ['flake8-hitrate-absent==3.7.4']}\nsetup(name='m', install_requires=[], extras_require=EXTRAS_REQUIRE)\n"
    )
    assert missing_distributions(tmp_path) == ["pytz-hitrate-absent"]
    # tox installs the reco extra too, and a requirements file of its own.
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = py37\n\n[testenv]\nextras = tests, reco\ndeps =\n    -rdev-requirements.txt\n    {[base]deps}\n")
    (tmp_path / "dev-requirements.txt").write_text("# tools\nmock-hitrate-absent>=2 ; python_version >= '3'\nold-hitrate-absent ; python_version < '3'\n")
    assert set(missing_distributions(tmp_path)) == {"pytz-hitrate-absent", "simplejson-hitrate-absent", "mock-hitrate-absent"}
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    cfg-hitrate-absent\n[options.extras_require]\ntesting = pytest\n")
    (tmp_path / "requirements.txt").write_text("-e .\nreq-hitrate-absent\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "m"\ndependencies = ["pyproject-hitrate-absent"]\n[project.optional-dependencies]\ntest = ["pytest"]\n')
    assert set(missing_distributions(tmp_path)) == {"pytz-hitrate-absent", "simplejson-hitrate-absent", "mock-hitrate-absent",
                                                     "cfg-hitrate-absent", "req-hitrate-absent", "pyproject-hitrate-absent"}  # fmt: skip


def test_an_instance_whose_tests_cannot_import_a_module_says_so_once(tmp_path):
    # Both runs collect nothing (ModuleNotFoundError): not "pass_to_pass test is missing" once per
    # test, and a fail_to_pass test that never ran proves nothing.
    row = json.loads(SWEBENCH.read_text().splitlines()[0])
    row["test_patch"] = row["test_patch"].replace("@@ -7,3 +7,7 @@", "@@ -7,3 +7,8 @@").replace(
        "+\n+\n+def test_median_of_even_count", "+\n+\n+import simplejson_hitrate_absent  # noqa\n+def test_median_of_even_count"
    )
    jsonl = tmp_path / "instances.jsonl"
    jsonl.write_text(json.dumps(row) + "\n")
    suite = load_suite(resolve_suite(f"swebench:{jsonl}", repos=str(SWEBENCH_REPOS)))
    [check] = check_tasks(suite.tasks, workers=1)
    assert check.problems == [] and check.verdict == "not runnable here"
    assert check.not_runnable == "its tests need what is not installed here (ModuleNotFoundError: No module named 'simplejson_hitrate_absent')"


def test_a_replay_without_a_model_runs_on_the_demo_model(monkeypatch, tmp_path):
    from hitrate.evals.commands import eval as cli_eval
    from hitrate.harness import defaults, demo
    from hitrate.harness.defaults import NoModelError

    def nothing():
        raise NoModelError("no model configured and none reachable")

    monkeypatch.setattr(defaults, "default_model", nothing)
    monkeypatch.setattr(demo, "ensure_demo_model", lambda root: tmp_path / "tiny")
    assert cli_eval._default_model(cli_eval.PolicyChoice.replay) == f"local/{tmp_path / 'tiny'}"
    with pytest.raises(NoModelError):
        cli_eval._default_model(cli_eval.PolicyChoice.model)
    with pytest.raises(NoModelError):
        cli_eval._default_model(None)


def _digest(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain (apt-get install golang-go)")
def test_go_grading_starts_from_a_warmed_build_cache_it_cannot_write(tmp_path, monkeypatch):
    from hitrate.evals import build_caches

    monkeypatch.setenv("HITRATE_BUILD_CACHE", str(tmp_path / "build-caches"))
    task = _polyglot().task("go-leap")
    assert task.spec.grader.seeded_caches == {"GOCACHE": "go"}
    [check] = check_tasks([task], workers=1)
    assert check.problems == [] and check.with_solution.resolved, check.with_solution.output
    [shared] = (tmp_path / "build-caches").glob("go-go1.*")
    before = _digest(shared)
    assert len(before) > 50 and build_caches.warmed_cache("go") == shared
    # Each run fills a copy inside its own grading folder; the shared cache is left as it was.
    kept = tmp_path / "grading"
    assert grade(task, overlay=task.solution_dir, work_root=kept).resolved
    assert _digest(shared) == before
    copy = kept / "leap" / ".cache" / "go-build"
    assert set(before) <= set(_digest(copy)) and len(_digest(copy)) > len(before)


# ---- Terminal-Bench 2: the prebuilt image task.toml names ------------------------------------------

# The later task.toml schema of the public Terminal-Bench 2 tasks ([task] table, memory_mb, env tables).
TB2_TASK_TOML = """schema_version = "1.1"

[task]
name = "terminal-bench/hello-file"
description = "Write a greeting file."
keywords = ["file-operations"]
[[task.authors]]
name = "hitrate"

[metadata]
difficulty = "easy"
category = "file-operations"
tags = ["file-operations"]

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
docker_image = "alexgshaw/hello-file:20251031"
cpus = 1
memory_mb = 2048
storage_mb = 10240
gpus = 0
allow_internet = true
mcp_servers = []

[verifier.env]

[environment.env]

[solution.env]
"""


class _RecordingCli:
    """The container CLI's image calls, answered as a runtime would: a pull that works or not."""

    name = "docker"

    def __init__(self, pull_error: str | None) -> None:
        self.pull_error = pull_error
        self.calls: list[tuple[str, str]] = []

    def pull(self, image: str, *, timeout_s: float) -> str | None:
        self.calls.append(("pull", image))
        return self.pull_error

    def build(self, context: Path, tag: str, *, timeout_s: float, log: Path | None = None) -> bool:
        self.calls.append(("build", tag))
        return True


def test_terminal_bench_2_tasks_use_their_prebuilt_image(tmp_path, monkeypatch):
    from hitrate.evals.harbor_env import HarborEnvironment

    monkeypatch.setattr(requirements, "container_runtime", lambda: ("/usr/bin/docker", ""))
    source = tmp_path / "tb2"
    shutil.copytree(HARBOR / "hello-file", source / "hello-file")
    (source / "hello-file" / "task.toml").write_text(TB2_TASK_TOML)
    shutil.copytree(HARBOR / "sum-column", source / "multi")
    (source / "multi" / "environment" / "docker-compose.yaml").write_text("services:\n  app:\n    build: .\n")
    suite = load_suite(resolve_suite(f"terminal-bench:{source}"))
    assert "docker-compose project (environment/docker-compose.yaml" in suite.unavailable["multi"]
    task = suite.task("hello-file")
    grader = task.spec.grader
    assert grader.docker_image == "alexgshaw/hello-file:20251031" and grader.memory_mb == 2048 and grader.allow_internet
    assert task.spec.title == "terminal-bench/hello-file" and task.spec.difficulty == "easy" and "file-operations" in task.spec.tags
    pulled = _RecordingCli(pull_error=None)
    environment = HarborEnvironment(task, pulled, tmp_path / "logs")
    assert environment.image() == "alexgshaw/hello-file:20251031" and pulled.calls == [("pull", "alexgshaw/hello-file:20251031")]
    assert environment.image_note == "[prebuilt image alexgshaw/hello-file:20251031]\n"
    # Offline: the Dockerfile is built as before, and the output says why.
    offline = _RecordingCli(pull_error="docker pull of alexgshaw/hello-file:20251031 failed (exit 1): dial tcp: lookup registry-1.docker.io")
    environment = HarborEnvironment(task, offline, tmp_path / "logs")
    assert environment.image().startswith("hitrate-harbor/hello-file:") and [c[0] for c in offline.calls] == ["pull", "build"]
    assert "not used (docker pull of alexgshaw/hello-file:20251031 failed (exit 1): dial tcp" in environment.image_note


def test_swebench_instances_load_from_parquet_and_a_saved_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [json.loads(line) for line in SWEBENCH.read_text().splitlines()]
    published = datasets.Dataset.from_list(rows)
    published.to_parquet(str(tmp_path / "test-00000-of-00001.parquet"))
    datasets.DatasetDict({"dev": published, "test": published}).save_to_disk(str(tmp_path / "saved"))
    expected = [t.id for t in _swebench().tasks]
    for source in (tmp_path / "test-00000-of-00001.parquet", tmp_path / "saved"):
        suite = load_suite(resolve_suite(f"swebench:{source}", repos=str(SWEBENCH_REPOS)))
        assert [t.id for t in suite.tasks] == expected
        assert suite.task(expected[0]).spec.grader.fail_to_pass == json.loads(rows[0]["FAIL_TO_PASS"])
    published.save_to_disk(str(tmp_path / "one-split"))
    assert [t.id for t in load_suite(resolve_suite(f"swebench:{tmp_path / 'one-split'}", repos=str(SWEBENCH_REPOS))).tasks] == expected
    (tmp_path / "broken.parquet").write_text("not parquet")
    with pytest.raises(BenchmarkError, match="not a parquet file"):
        resolve_suite(f"swebench:{tmp_path / 'broken.parquet'}", repos=str(SWEBENCH_REPOS))
