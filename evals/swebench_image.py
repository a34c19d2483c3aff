"""Grading a SWE-bench task in its official image, by the official harness itself.

The agent's work becomes a prediction (`model_patch`: the diff from the base commit's tree to the
graded workspace) and goes to `swebench.harness.run_evaluation.run_instance` with the instance's
test spec (image, eval script, log parser), exactly as `python -m swebench.harness.run_evaluation`
grades a prediction: the verdict is SWE-bench's own. Its logs go under the grading folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from hitrate.evals.grading import OUTPUT_TAIL_CHARS, GradeResult
from hitrate.evals.junit import TestOutcome
from hitrate.evals.task import Task
from hitrate.evals.task_graders import SwebenchGrader

_LOG_DIR_LOCK = threading.Lock()
_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache")
_GIT_ENV = {"GIT_AUTHOR_NAME": "hitrate", "GIT_AUTHOR_EMAIL": "hitrate@localhost", "GIT_COMMITTER_NAME": "hitrate",
            "GIT_COMMITTER_EMAIL": "hitrate@localhost", "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **_GIT_ENV, "GIT_CEILING_DIRECTORIES": str(repo.parent)}
    done = subprocess.run(["git", "-c", "core.autocrlf=false", *args], cwd=repo, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


def model_patch(base: Path, changed: Path) -> str:
    """The unified diff (git's, binary files included) that turns tree `base` into tree `changed`."""
    with tempfile.TemporaryDirectory(prefix="hitrate-patch-") as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(base, repo, symlinks=True, ignore=_IGNORE)
        _git(repo, "init", "-q")
        _git(repo, "add", "-A", "-f")
        _git(repo, "commit", "-q", "--no-verify", "--allow-empty", "-m", "base")
        for child in repo.iterdir():
            if child.name == ".git":
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        shutil.copytree(changed, repo, symlinks=True, ignore=_IGNORE, dirs_exist_ok=True)
        _git(repo, "add", "-A", "-f")
        return _git(repo, "diff", "--cached", "--binary")


def _instance(grader: SwebenchGrader) -> dict[str, Any]:
    return {
        "instance_id": grader.instance_id, "repo": grader.repo, "version": grader.version, "image": grader.image,
        "eval_script": grader.eval_script, "log_parser": grader.log_parser, "eval_type": grader.eval_type,
        "FAIL_TO_PASS": list(grader.fail_to_pass), "PASS_TO_PASS": list(grader.pass_to_pass),
    }  # fmt: skip


def grade_in_image(task: Task, grader: SwebenchGrader, work_dir: Path, root: Path, limit: float) -> GradeResult:
    import docker
    from swebench.harness import run_evaluation
    from swebench.harness.constants import FAIL_TO_PASS, LOG_TEST_OUTPUT, PASS_TO_PASS
    from swebench.harness.utils import make_test_spec

    patch = model_patch(task.workspace_dir, work_dir)
    spec = make_test_spec(_instance(grader))
    run_id = f"hitrate-{root.name}"
    log_root = Path(tempfile.gettempdir()) / "hitrate-swebench-logs"
    with _LOG_DIR_LOCK:
        # The harness writes its logs under a module-level relative folder; one absolute folder for
        # every grading of this process, each under its own run id.
        run_evaluation.RUN_EVALUATION_LOG_DIR = log_root
    prediction = {"instance_id": grader.instance_id, "model_name_or_path": "hitrate", "model_patch": patch}
    infra_error = None
    entry: dict[str, Any] = {}
    try:
        # An unchanged workspace has no diff to apply (the harness would fail applying an empty
        # patch): its own negative-test mode runs the tests on the base commit instead.
        outcome = run_evaluation.run_instance(spec, prediction, docker.from_env(), run_id, timeout=int(limit), skip_patch=not patch)
        # run_instance answers None when it hit an error of its own (logged in run_instance.log).
        entry = (outcome[1] or {}).get(grader.instance_id) or {} if outcome else {}
        if not entry:
            infra_error = "the official harness produced no report (see its run_instance.log)"
        elif entry.get("infra_failure") or entry.get("infra_failure_reason"):
            reason = entry.get("infra_failure_reason") or "unspecified"
            infra_error = f"the official harness reported an infrastructure failure ({reason}; see its test_output.txt)"
        elif entry.get("patch_exists") and not entry.get("patch_successfully_applied"):
            # The harness says so whenever the log holds no readable test result: a diff that did
            # not apply, or tests that never ran.
            infra_error = "the official harness found no test result in the log (the diff did not apply, or the tests did not run; see its test_output.txt)"
    except Exception as exc:  # docker errors, image pulls, the harness's EvaluationError
        infra_error = f"official SWE-bench harness: {type(exc).__name__}: {exc}"
    log_dir = log_root / run_id / "hitrate" / grader.instance_id
    output_file = log_dir / LOG_TEST_OUTPUT
    output = output_file.read_text(encoding="utf-8", errors="replace") if output_file.is_file() else ""
    if log_dir.is_dir():  # kept in this grading's own folder; the shared log folder is cleared
        shutil.copytree(log_dir, root / "swebench-logs", dirs_exist_ok=True)
    shutil.rmtree(log_root / run_id, ignore_errors=True)
    status = entry.get("tests_status") or {}
    outcomes = {t: TestOutcome.missing for t in task.test_ids}
    for group in (FAIL_TO_PASS, PASS_TO_PASS):
        for test in (status.get(group) or {}).get("success", []):
            outcomes[test] = TestOutcome.passed
        for test in (status.get(group) or {}).get("failure", []):
            outcomes[test] = TestOutcome.failed
    resolved = bool(entry.get("resolved")) and infra_error is None
    return GradeResult(
        task_id=task.id,
        resolved=resolved,
        outcomes=outcomes,
        unlisted={},
        f2p_passed=sum(outcomes[t] is TestOutcome.passed for t in grader.fail_to_pass),
        f2p_total=len(grader.fail_to_pass),
        p2p_passed=sum(outcomes[t] is TestOutcome.passed for t in grader.pass_to_pass),
        p2p_total=len(grader.pass_to_pass),
        exit_code=None,
        timed_out="Tests Timed Out" in output,
        infra_error=infra_error,
        duration_s=0.0,
        output=(f"[graded by swebench in {grader.image}]\n" + output)[-OUTPUT_TAIL_CHARS:],
        confined=True,
    )
