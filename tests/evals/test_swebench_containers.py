"""SWE-bench instances graded by the official harness in their instance images, for real: the
`swebench` package's `run_instance` drives podman through its Docker-compatible API (docker-py),
applies the workspace's diff in the image, runs the instance's eval script and parses the log.

No registry is reachable, so the instance images are built here: a base made from this machine's
programs (bash, git, python3 with pytest; `container_base`) plus the repository at its base
commit in /testbed, tagged with the instance's official image name. The eval scripts have the
official shape (`set -uxo pipefail`, the test patch applied from a heredoc, the output markers)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from container_base import environment, podman_problem, prepare_base_image, remove_store, start_docker_api, store_env
from runner_fakes import FakeRoutes, PrefixCacheBackend

from hitrate.evals.benchmarks import canonical_suite, resolve_suite
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.evals.suite_check import check_tasks
from hitrate.evals.task import load_suite
from hitrate.store.ledger import Ledger

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks" / "swebench"
BASE = "localhost/hitrate-test-swebench-base:latest"

pytestmark = pytest.mark.slow

EVAL_SCRIPT = """#!/bin/bash
set -uxo pipefail
cd /testbed
git config --global --add safe.directory /testbed
git status
git -c core.fileMode=false diff {base}
git checkout {base} {tests}
git apply -v - <<'EOF_114329324912'
{test_patch}
EOF_114329324912
: '>>>>> Start Test Output'
pytest -rA {tests}
: '>>>>> End Test Output'
git checkout {base} {tests}
"""


def _image_name(instance_id: str) -> str:
    # The official naming: sweb.eval.<arch>.<instance id with "__" as "_1776_">.
    return f"docker.io/swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_').lower()}:latest"


def _podman(env: dict[str, str], *args: str) -> None:
    subprocess.run(["podman", *args], check=True, env={**os.environ, **env}, capture_output=True)


@pytest.fixture(scope="module")
def instances(tmp_path_factory):
    pytest.importorskip("docker")
    pytest.importorskip("swebench.harness.run_evaluation")
    problem = podman_problem()
    if problem:
        pytest.skip(problem)
    folder = tmp_path_factory.mktemp("podman-swebench")
    env = {**store_env(folder), "HITRATE_CONTAINER_RUNTIME": "podman", "HITRATE_SUITE_CACHE": str(folder / "suite-cache")}
    problem = prepare_base_image(folder, env, (BASE,), programs=("git",), python_packages=("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py"))
    if problem:
        pytest.skip(problem)
    rows = [json.loads(line) for line in (FIXTURES / "instances.jsonl").read_text().splitlines()]
    bundle = FIXTURES / "repos" / "hitrate-fixtures__tinycalc.bundle"
    for row in rows:
        context = folder / row["instance_id"]
        subprocess.run(["git", "clone", "-q", str(bundle), str(context / "testbed")], check=True)
        subprocess.run(["git", "-C", str(context / "testbed"), "checkout", "-q", row["base_commit"]], check=True)
        # PYTHONPATH stands for the official images' editable install of the repository.
        (context / "Dockerfile").write_text(f"FROM {BASE}\nCOPY testbed /testbed\nWORKDIR /testbed\nENV PYTHONPATH=/testbed\n")
        _podman(env, "build", "-q", "-t", _image_name(row["instance_id"]), str(context))
        tests = " ".join(sorted(set(re.findall(r"^diff --git a/(\S+)", row["test_patch"], re.M))))
        row.update(
            image=_image_name(row["instance_id"]),
            eval_script=EVAL_SCRIPT.format(base=row["base_commit"], tests=tests, test_patch=row["test_patch"].rstrip("\n")),
            log_parser="parse_log_pytest",
            eval_type="pass_and_fail",
        )
    jsonl = folder / "with-images.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    service, docker_host = start_docker_api(folder, env)
    env["DOCKER_HOST"] = docker_host
    with environment(env):
        yield jsonl
        service.terminate()
        service.wait(timeout=30)
    remove_store(folder, env)


def test_suite_check_grades_each_instance_in_its_image_with_the_official_harness(instances):
    suite = load_suite(resolve_suite(f"swebench:{instances}", repos=str(FIXTURES / "repos")))
    assert suite.unavailable == {} and len(suite.tasks) == 2
    checks = check_tasks(suite.tasks)
    assert [c.problems for c in checks] == [[], []]
    for check in checks:
        grader = suite.task(check.task_id).spec.grader
        assert check.with_solution.output.startswith(f"[graded by swebench in {grader.image}]")
        assert check.with_solution.resolved and check.with_solution.infra_error is None
        assert not check.on_workspace.resolved and check.on_workspace.infra_error is None
        assert check.with_solution.f2p_passed == check.with_solution.f2p_total >= 1


def test_replayed_run_passes_in_the_official_images(instances, tmp_path):
    settings = EvalSettings(suite=canonical_suite(f"swebench:{instances}"), repos=str(FIXTURES / "repos"),
                            model="openai-compat/fake@http://127.0.0.1:9/v1", policy="replay")  # fmt: skip
    run = run_eval(settings, db_path=tmp_path / "runs.db", workers=2, routes=FakeRoutes(PrefixCacheBackend()))
    assert run.status == "finished" and [r.outcome for r in run.results] == ["pass", "pass"]
    with Ledger(tmp_path / "runs.db") as ledger:
        for row in ledger.tasks(run_id=run.run_id):
            assert row.detail["tries"][0]["test_output"].startswith("[graded by swebench in docker.io/swebench/sweb.eval.")
