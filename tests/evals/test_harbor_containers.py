"""Terminal-Bench / Harbor tasks in real containers (podman): the task image built from its
environment/, the agent's shell in the container, the verifier's reward, the oracle, and runs —
threaded and on a local Ray instance. The base image the fixtures' Dockerfiles start from is made
on this machine (`container_base`), in a podman store of the tests' own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from container_base import environment, podman_problem, prepare_base_image, remove_store, store_env
from runner_fakes import FakeRoutes, PrefixCacheBackend, fake_llm_server_module

from hitrate.evals import requirements
from hitrate.evals.benchmarks import canonical_suite, resolve_suite
from hitrate.evals.harbor_env import HarborEnvironment, read_rewards
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.evals.suite_check import check_tasks
from hitrate.evals.task import load_suite
from hitrate.store.ledger import Ledger
from hitrate.tools import ToolContext, ToolRegistry, default_tools

HARBOR = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks" / "terminal-bench"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    """A podman store with the base image, set for this module (and the Ray workers it starts)."""
    problem = podman_problem()
    if problem:
        pytest.skip(problem)
    folder = tmp_path_factory.mktemp("podman")
    env = {**store_env(folder), "HITRATE_CONTAINER_RUNTIME": "podman", "HITRATE_SUITE_CACHE": str(folder / "suite-cache")}
    problem = prepare_base_image(folder, env)
    if problem:
        pytest.skip(problem)
    with environment(env):
        yield env
    remove_store(folder, env)


@pytest.fixture
def suite(podman):
    return load_suite(resolve_suite(f"terminal-bench:{HARBOR}"))


def _containers() -> list[str]:
    done = subprocess.run(["podman", "ps", "-a", "-q", "--filter", "label=hitrate.task"], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_with_podman_the_tasks_run_and_suite_check_proves_them_with_the_oracle(suite):
    assert sorted(t.id for t in suite.tasks) == ["hello-file", "sum-column"] and suite.unavailable == {}
    checks = check_tasks(suite.tasks)
    assert [c.problems for c in checks] == [[], []]
    for check in checks:
        # Unsolved, the verifier wrote reward 0; after solve.sh, reward 1.
        assert not check.on_workspace.resolved and check.on_workspace.outcomes["reward"].value == "failed"
        assert check.with_solution.resolved and '"reward": 1.0' in check.with_solution.output
        assert "in podman container" in check.with_solution.output
    assert _containers() == []  # every container of the checks was removed


def test_the_shell_runs_in_the_task_container_offline_and_the_workspace_is_its_workdir(suite, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-never-in-the-container")
    task = suite.task("sum-column")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with HarborEnvironment(task, requirements.container_cli(), tmp_path / "logs") as environment:
        shell = environment.start(workspace)
        assert shell.workdir == "/app"
        # The image's /app (built by the Dockerfile's RUN) is in the workspace the file tools see.
        assert (workspace / "sales.csv").read_text().startswith("region,amount")
        registry = ToolRegistry(default_tools())
        ctx = ToolContext(workspace=workspace, container=shell)
        result = registry.execute("shell", {"command": "pwd; cat /etc/passwd | head -1; ls /sys/class/net"}, ctx)
        assert result.metadata["sandbox"] == "container" and not result.is_error
        assert result.content.splitlines()[:2] == ["/app", "root:x:0:0:root:/root:/bin/sh"]
        assert result.content.splitlines()[2] == "lo"  # no network but loopback
        # A file written by the file tools under the container's path is the container's file.
        registry.execute("write_file", {"path": "/app/total.txt", "content": "245\n"}, ctx)
        assert registry.execute("shell", {"command": "cat /app/total.txt"}, ctx).content.startswith("245")
        assert "sk-host-secret" not in registry.execute("shell", {"command": "env; cat /proc/1/environ"}, ctx).content
        slow = registry.execute("shell", {"command": "sleep 30", "timeout_s": 1}, ctx)
        assert slow.metadata["timed_out"] and "timed out after 1 s" in slow.content
        # Killed inside the container, not only its exec client (busybox's `timeout` watcher may
        # linger for its -k grace period, the command itself does not).
        running = registry.execute("shell", {"command": "ps -o args"}, ctx).content.splitlines()
        assert "sleep 30" not in [line.strip() for line in running]
        assert environment.verify().resolved
    assert _containers() == []


def test_replayed_run_passes_and_a_forged_reward_file_does_not(suite, tmp_path):
    db = tmp_path / "runs.db"
    settings = EvalSettings(suite=canonical_suite(f"terminal-bench:{HARBOR}"), model="openai-compat/fake@http://127.0.0.1:9/v1", policy="replay")
    run = run_eval(settings, db_path=db, workers=2, routes=FakeRoutes(PrefixCacheBackend()))
    assert run.status == "finished" and [r.outcome for r in run.results] == ["pass", "pass"]
    with Ledger(db) as ledger:
        rows = {t.name: t for t in ledger.tasks(run_id=run.run_id)}
        shell_turn = rows["sum-column"].detail["tries"][0]["turns"][1]
        [call] = shell_turn["tool_calls"]
        assert call["name"] == "shell" and "sales.csv" in json.loads(call["arguments"])["command"]
        assert len(ledger.calls(task_id=rows["hello-file"].id)) == 3  # list_dir, the solution, the closing turn

    # A model that writes the reward file instead of the answer fails: the verifier clears it.
    cheat = json.dumps({"command": "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && mkdir -p /tests && echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh"})
    backend = PrefixCacheBackend(replies=[{"tool_calls": [("shell", cheat)]}, {"text": "Done."}])
    settings = EvalSettings(suite=canonical_suite(f"terminal-bench:{HARBOR}"), model="openai-compat/fake@http://127.0.0.1:9/v1", policy="model", task_ids=["hello-file"])
    run = run_eval(settings, db_path=db, routes=FakeRoutes(backend))
    assert [r.outcome for r in run.results] == ["fail"]
    with Ledger(db) as ledger:
        [row] = [t for t in ledger.tasks(run_id=run.run_id)]
        assert '"reward": 0.0' in row.detail["tries"][0]["test_output"]  # the real test.sh ran
    assert _containers() == []


def test_rewards_are_read_as_harbor_reads_them(tmp_path):
    (tmp_path / "reward.txt").write_text("0.5\n")
    assert read_rewards(tmp_path) == ({"reward": 0.5}, None)
    (tmp_path / "reward.txt").unlink()
    (tmp_path / "reward.json").write_text('{"correct": 1, "style": 1.0}')
    assert read_rewards(tmp_path) == ({"correct": 1.0, "style": 1.0}, None)
    (tmp_path / "reward.json").write_text('{"correct": "yes"}')
    assert read_rewards(tmp_path)[1] == "reward.json: 'correct' is not a number"
    (tmp_path / "reward.json").unlink()
    assert read_rewards(tmp_path) == (None, "the verifier wrote no /logs/verifier/reward.txt or reward.json")
    (tmp_path / "reward.txt").write_text("nan")
    assert "not finite" in read_rewards(tmp_path)[1]


def test_ray_workers_run_the_tasks_in_their_containers(podman, tmp_path):
    """The replayed run of the examples on a local Ray instance (each worker drives podman)."""
    ray = pytest.importorskip("ray")
    from hitrate.evals.ray_executor import run_eval_ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": dict(podman)})
    try:
        settings = EvalSettings(suite=canonical_suite(f"terminal-bench:{HARBOR}"), model="openai-compat/fake@http://127.0.0.1:9/v1", policy="replay")
        server = _fake_server()
        try:
            settings = settings.model_copy(update={"model": f"openai-compat/fake@{server.url}/v1"})
            result = run_eval_ray(settings, db_path=tmp_path / "runs.db")
        finally:
            server.stop()
    finally:
        ray.shutdown()
    assert result.status == "finished" and sorted((r.name, r.outcome) for r in result.results) == [("hello-file", "pass"), ("sum-column", "pass")]
    with Ledger(tmp_path / "runs.db") as ledger:
        assert len(ledger.calls(run_id=result.run_id)) == 6
    assert _containers() == []


def _fake_server():
    fake = fake_llm_server_module()
    return fake.FakeLLMServer(default=lambda record: fake.Reply(text="ok")).start()
