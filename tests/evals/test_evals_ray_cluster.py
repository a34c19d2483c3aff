"""`--executor ray` against a Ray cluster of its own, named by RAY_ADDRESS: a head node and a second
worker node, each a separate `ray start` (separate raylets, as on two machines), the driver in the
test process. Tasks land on both nodes; their shards come back with the results."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from runner_fakes import fake_llm_server_module

ray = pytest.importorskip("ray")

from hitrate.store.ledger import Ledger  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks"
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    program = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    return subprocess.Popen([program, "start", "--block", "--disable-usage-stats", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Every process of that node (`ray start` and what it spawned share its process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    if ray.is_initialized():
        ray.shutdown()
    port = _free_port()
    # Ray's unix sockets live under its temp folder, and a socket path has at most 107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    # `ray start --head` turns token authentication on unless told otherwise; the driver here has
    # read its (disabled) auth mode when ray was imported, so the test cluster runs without one.
    env = {**os.environ, "HITRATE_SUITE_CACHE": str(tmp_path / "suite-cache"), "RAY_AUTH_MODE": "disabled"}
    head = _ray_start(["--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false", f"--temp-dir={temp}"], env)
    nodes = [head]
    try:
        deadline = time.monotonic() + 120
        address_file = temp / "ray_current_cluster"
        while not address_file.is_file() or not address_file.read_text().strip():
            if time.monotonic() > deadline or head.poll() is not None:
                pytest.skip("the Ray head node did not come up")
            time.sleep(0.5)
        address = address_file.read_text().strip()
        nodes.append(_ray_start([f"--address={address}", "--num-cpus=1"], env))
        for name in ("HITRATE_SUITE_CACHE", "RAY_AUTH_MODE"):
            monkeypatch.setenv(name, env[name])
        monkeypatch.setenv("RAY_ADDRESS", address)
        # Asked from another process: this one's first connection is run_eval_ray's own.
        count = "import ray; ray.init(address='auto', log_to_driver=False); print(len([n for n in ray.nodes() if n['Alive']]))"
        while subprocess.run([sys.executable, "-c", count], capture_output=True, text=True, env={**env, "RAY_ADDRESS": address}).stdout.strip() != "2":
            if time.monotonic() > deadline:
                pytest.skip("the second Ray node did not join")
            time.sleep(1)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for proc in reversed(nodes):
            _stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


def test_hitrate_eval_runs_on_a_two_node_cluster_named_by_ray_address(cluster, tmp_path):
    """The driver is `hitrate eval --executor ray` in a process of its own, as a user runs it."""
    fake = fake_llm_server_module()
    server = fake.FakeLLMServer(default=lambda record: fake.Reply(text="ok")).start()
    db = tmp_path / "runs.db"
    try:
        done = subprocess.run(
            [shutil.which("hitrate", path=str(Path(sys.executable).parent)) or "hitrate", "eval", f"aider-polyglot:{FIXTURES / 'aider-polyglot'}", "--policy", "replay",
             "--executor", "ray", "-m", f"openai-compat/fake@{server.url}/v1", "--db", str(db),
             "-t", "python-leap", "-t", "python-raindrops"],
            capture_output=True, text=True, timeout=600, env={**os.environ, "RAY_ADDRESS": cluster, "NO_COLOR": "1"},
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with Ledger(db) as ledger:
        [run] = ledger.runs()
        rows = ledger.tasks(run_id=run.id)
        assert sorted((r.name, r.outcome) for r in rows) == [("python-leap", "pass"), ("python-raindrops", "pass")]
        # One CPU per node and two tasks submitted together: one task on each node.
        assert len({r.detail["ray_node_id"] for r in rows}) == 2
        assert all(r.detail["executor"] == "ray" for r in rows)
        assert len(ledger.calls(run_id=run.id)) == sum(len(ledger.calls(task_id=r.id)) for r in rows) > 0
