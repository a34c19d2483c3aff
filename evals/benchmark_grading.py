"""Grading for tasks converted from published benchmarks, each by that benchmark's own rules
(see `task_graders`). Like hitrate's pytest grading, it copies the workspace into a fresh folder,
puts the hidden tests back in their original form, and runs the code under test in the OS sandbox
with an allowlisted environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hitrate.evals.build_caches import prepared as prepared_packages
from hitrate.evals.build_caches import seed as seed_cache
from hitrate.evals.container_cli import ContainerError
from hitrate.evals.crates import cargo_config
from hitrate.evals.grading import OUTPUT_CAPTURE_BYTES, OUTPUT_TAIL_CHARS, GradeResult, clean_test_output
from hitrate.evals.junit import TestOutcome, match_outcomes, parse_junit
from hitrate.evals.task import Task
from hitrate.evals.task_graders import HARBOR_REWARD_KEY, CommandGrader, HarborGrader, SwebenchGrader
from hitrate.tools.confine import ConfinementPolicy, allowed_env, detect, sandboxed_argv
from hitrate.tools.shell import run_command

_COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
# The markers the official SWE-bench eval script prints around the test run; its log parsing
# (`swebench.harness.grading.get_logs_eval`) reads only what lies between them.
SWEBENCH_START = ">>>>> Start Test Output"
SWEBENCH_END = ">>>>> End Test Output"
SWEBENCH_EXIT = ">>>>> Test Exit Code"


def grade_benchmark(task: Task, source: Path, overlay: Path | None, timeout_s: float | None, root: Path) -> GradeResult:
    grader = task.spec.grader
    # Exercism's C++ CMakeLists.txt takes the exercise's name from its folder.
    work_dir = root / (grader.grading_folder if isinstance(grader, CommandGrader) else "work")
    if isinstance(grader, HarborGrader):
        return _grade_harbor(task, source, overlay, root)
    shutil.copytree(source, work_dir, symlinks=True, ignore=_COPY_IGNORE)
    if overlay is not None:
        shutil.copytree(overlay, work_dir, symlinks=True, ignore=_COPY_IGNORE, dirs_exist_ok=True)
    limit = timeout_s if timeout_s is not None else task.timeout_s
    if isinstance(grader, CommandGrader):
        return _grade_command(task, grader, source, work_dir, root, limit)
    if isinstance(grader, SwebenchGrader):
        return _grade_swebench(task, grader, source, work_dir, root, limit)
    raise TypeError(f"task {task.id}: unknown grader {grader!r}")


def _grade_harbor(task: Task, source: Path, overlay: Path | None, root: Path) -> GradeResult:
    """A fresh container of the task with `source` laid over its working directory; `overlay`
    being the task's solution/ means Harbor's oracle (solve.sh runs first), any other folder is
    copied over the workspace like for other tasks."""
    from hitrate.evals.harbor_env import HarborEnvironment
    from hitrate.evals.requirements import container_cli

    work_dir = root / "work"
    shutil.copytree(source, work_dir, symlinks=True, ignore=_COPY_IGNORE)
    oracle = overlay is not None and overlay.resolve() == task.solution_dir.resolve()
    if overlay is not None and not oracle:
        shutil.copytree(overlay, work_dir, symlinks=True, ignore=_COPY_IGNORE, dirs_exist_ok=True)
    try:
        with HarborEnvironment(task, container_cli(), root / "logs") as environment:
            environment.start(work_dir)
            if oracle:
                environment.run_oracle()
            return environment.verify()
    except ContainerError as exc:
        return GradeResult.one_verdict(task.id, HARBOR_REWARD_KEY, TestOutcome.missing, exit_code=None, timed_out=False,
                                       infra_error=str(exc), duration_s=0.0, output="", confined=True)  # fmt: skip


def _run_confined(task: Task, argv: list[str], work_dir: Path, root: Path, env: dict[str, str], limit: float,
                  *, address_space_limit: bool = True):  # fmt: skip
    sandbox = detect()
    policy = ConfinementPolicy(hidden_paths=task.hidden_paths)
    if not address_space_limit:
        policy = policy.model_copy(update={"max_memory_bytes": None})
    argv = sandboxed_argv(argv, sandbox, workspace=root, policy=policy, env=env, cwd=work_dir)
    started = time.monotonic()
    try:
        outcome = run_command(
            argv, cwd=str(work_dir), env=env, timeout_s=limit, max_output_bytes=OUTPUT_CAPTURE_BYTES, kill_grace_s=2.0
        )
    except Exception as exc:  # run_command reports a failed start as ToolError
        return None, False, "", f"could not start {argv[0]}: {exc}", time.monotonic() - started, sandbox.confined
    exit_code = None if outcome.timed_out else outcome.exit_code
    return exit_code, outcome.timed_out, outcome.output, None, time.monotonic() - started, sandbox.confined


def _base_env(work_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    env, _withheld = allowed_env(os.environ)
    env["NO_COLOR"] = "1"
    env["TMPDIR"] = "/tmp"
    for name, value in extra.items():
        env[name] = value if os.path.isabs(value) or "/" not in value else str(work_dir / value)
    return env


def _grade_command(task: Task, grader: CommandGrader, source: Path, work_dir: Path, root: Path, limit: float) -> GradeResult:
    # Aider's benchmark copies the original test files back before every run, so edits the agent
    # made to them do not count.
    for rel in grader.test_files:
        target = work_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.is_symlink():
            target.unlink()
        shutil.copyfile(task.tests_dir / rel, target)
    for rel, name in grader.linked_packages.items():
        packages = prepared_packages(name)
        if packages is not None:
            link = work_dir / rel
            if link.is_symlink() or link.is_file():
                link.unlink()
            elif link.exists():
                shutil.rmtree(link)  # the agent's own install does not count
            link.symlink_to(packages, target_is_directory=True)
    if (config := cargo_config({**grader.crates, **grader.oracle_crates})) is not None:
        # Beside the grading folder, not in it: cargo reads its parents' .cargo/ too.
        (root / ".cargo").mkdir(exist_ok=True)
        (root / ".cargo" / "config.toml").write_text(config, encoding="utf-8")
    env = _base_env(work_dir, grader.env)
    for variable, cache in grader.seeded_caches.items():
        if variable in env:
            seed_cache(cache, Path(env[variable]))
    exit_code, timed_out, output, launch_error, duration, confined = _run_confined(
        task, list(grader.command), work_dir, root, env, limit, address_space_limit=grader.address_space_limit
    )
    passed = launch_error is None and not timed_out and exit_code == 0
    outcome = TestOutcome.passed if passed else TestOutcome.failed
    return GradeResult.one_verdict(
        task.id, grader.test_id, outcome, exit_code=exit_code, timed_out=timed_out, infra_error=launch_error,
        duration_s=round(duration, 3), output=clean_test_output(output, root)[-OUTPUT_TAIL_CHARS:],
        suspicious_changes=[f"edited hidden test file {rel}" for rel in grader.test_files if _differs(source / rel, task.tests_dir / rel)],
        confined=confined,
    )


def _differs(agent_file: Path, original: Path) -> bool:
    return agent_file.is_file() and agent_file.read_bytes() != original.read_bytes()


def _restore_test_files(task: Task, grader: SwebenchGrader, work_dir: Path) -> None:
    # The official eval script checks the test files out at the base commit before applying the
    # test patch, so whatever the agent did to them is undone.
    for rel in grader.test_files:
        target, original = work_dir / rel, task.workspace_dir / rel
        if target.is_file() or target.is_symlink():
            target.unlink()
        if original.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(original, target)


def apply_patch(patch: Path, folder: Path) -> str | None:
    """`git apply` the patch inside `folder` (a plain folder, not necessarily a repository); the
    error text when it does not apply."""
    done = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "--unsafe-paths", str(patch)],
        cwd=folder, capture_output=True, text=True, timeout=120,
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(folder.parent)},
    )  # fmt: skip
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip()


def _official_grading():
    """The official harness's grading functions, or None when the `swebench` extra is absent."""
    try:
        from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, EvalType, ResolvedStatus
        from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status
        from swebench.types import TestSpec
    except ImportError:
        return None
    return FAIL_TO_PASS, PASS_TO_PASS, EvalType, ResolvedStatus, get_eval_tests_report, get_logs_eval, get_resolution_status, TestSpec


def _grade_swebench(task: Task, grader: SwebenchGrader, source: Path, work_dir: Path, root: Path, limit: float) -> GradeResult:
    from hitrate.evals.requirements import in_official_image

    if in_official_image(grader):
        from hitrate.evals.swebench_image import grade_in_image

        # The official eval script restores the test files and applies the test patch itself.
        started = time.monotonic()
        result = grade_in_image(task, grader, work_dir, root, limit)
        changed = [f"edited test file {rel}" for rel in grader.test_files if _differs(source / rel, task.workspace_dir / rel)]
        return result.model_copy(update={"duration_s": round(time.monotonic() - started, 3), "suspicious_changes": changed})
    _restore_test_files(task, grader, work_dir)
    patch_error = apply_patch(task.tests_dir / "test.patch", work_dir)
    official = _official_grading()
    junit_path = root / "junit.xml"
    argv = [sys.executable, *grader.test_command]
    if official is None:
        argv.append(f"--junitxml={junit_path}")
    pythonpath = [str(work_dir)] + ([str(work_dir / "src")] if (work_dir / "src").is_dir() else [])
    env = _base_env(work_dir, {})
    env.update(PYTHONPATH=os.pathsep.join(pythonpath), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    if patch_error is None:
        exit_code, timed_out, output, launch_error, duration, confined = _run_confined(task, argv, work_dir, root, env, limit)
    else:
        exit_code, timed_out, output, launch_error, duration, confined = None, False, "", None, 0.0, False
    diagnosis = ""
    if launch_error is None and not timed_out and _COLLECTION_ERROR.search(output):
        diagnosis = clean_test_output(_collection_errors(task, grader, work_dir, root, env, limit), root)
    output = clean_test_output(output, root)
    infra_error = launch_error or (f"the test patch does not apply: {patch_error}" if patch_error else None)
    outcomes: dict[str, TestOutcome] = {t: TestOutcome.missing for t in task.test_ids}
    resolved = False
    graded_by = "swebench" if official is not None else "hitrate-junit"
    if infra_error is None and not timed_out:
        if official is not None:
            resolved, outcomes = _official_verdict(official, grader, output, exit_code, root)
        elif junit_path.is_file():
            listed, _others = match_outcomes(task.test_ids, parse_junit(junit_path.read_text(encoding="utf-8", errors="replace")))
            outcomes = listed
            resolved = all(listed[t] is TestOutcome.passed for t in grader.fail_to_pass) and all(
                listed[t] in (TestOutcome.passed, TestOutcome.skipped) for t in grader.pass_to_pass
            )
        else:
            infra_error = f"pytest wrote no JUnit report (exit status {exit_code})"
    f2p = sum(outcomes[t] is TestOutcome.passed for t in grader.fail_to_pass)
    p2p = sum(outcomes[t] in (TestOutcome.passed, TestOutcome.skipped) for t in grader.pass_to_pass)
    return GradeResult(
        task_id=task.id,
        resolved=resolved,
        outcomes=outcomes,
        unlisted={},
        f2p_passed=f2p,
        f2p_total=len(grader.fail_to_pass),
        p2p_passed=p2p,
        p2p_total=len(grader.pass_to_pass),
        exit_code=exit_code,
        timed_out=timed_out,
        infra_error=infra_error,
        duration_s=round(duration, 3),
        output=(f"[graded by {graded_by}]\n" + output + diagnosis)[-OUTPUT_TAIL_CHARS:],
        suspicious_changes=[f"edited test file {rel}" for rel in grader.test_files if _differs(source / rel, task.workspace_dir / rel)],
        confined=confined,
    )


# pytest's closing line when test files could not be imported; SWE-bench's command (--tb=no)
# then prints no reason.
_COLLECTION_ERROR = re.compile(r"\d+ errors? during collection")


def _collection_errors(task: Task, grader: SwebenchGrader, work_dir: Path, root: Path, env: dict[str, str], limit: float) -> str:
    """Why the test files could not be collected (the import error), from a second, collect-only
    run that prints it; the verdict stays the one of the graded run."""
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "--tb=line", "-p", "no:cacheprovider", *grader.test_files]
    _code, _timed_out, text, _error, _duration, _confined = _run_confined(task, argv, work_dir, root, env, limit)
    reasons = [line.strip() for line in text.splitlines() if re.search(r"\w(Error|Exception)\b", line)]
    return "\n[why collection failed]\n" + "\n".join(dict.fromkeys(reasons)) + "\n" if reasons else ""


def _official_verdict(official, grader: SwebenchGrader, output: str, exit_code: int | None, root: Path):
    """The official harness's verdict on the run's log, written the way its eval script writes it."""
    F2P, P2P, EvalType, ResolvedStatus, get_eval_tests_report, get_logs_eval, get_resolution_status, TestSpec = official
    log_path = root / "test_output.txt"
    log_path.write_text(f"{SWEBENCH_START}\n{output}\n{SWEBENCH_END}\n{SWEBENCH_EXIT}: {exit_code}\n", encoding="utf-8")
    spec = TestSpec(
        instance_id=grader.instance_id, image=grader.image or "", eval_script_list=[], repo=grader.repo,
        version=grader.version, FAIL_TO_PASS=list(grader.fail_to_pass), PASS_TO_PASS=list(grader.pass_to_pass),
        log_parser=grader.log_parser, eval_type=grader.eval_type,
    )  # fmt: skip
    status_map, found = get_logs_eval(spec, str(log_path))
    outcomes = {t: TestOutcome.missing for t in [*grader.fail_to_pass, *grader.pass_to_pass]}
    if not found:
        return False, outcomes
    report = get_eval_tests_report(status_map, {F2P: grader.fail_to_pass, P2P: grader.pass_to_pass}, eval_type=EvalType(grader.eval_type))
    for group in (F2P, P2P):
        for test in report[group]["success"]:
            outcomes[test] = TestOutcome.passed
        for test in report[group]["failure"]:
            outcomes[test] = TestOutcome.failed
    (root / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return get_resolution_status(report) == ResolvedStatus.FULL.value, outcomes
