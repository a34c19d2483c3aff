"""`--executor ray` on a local Ray instance started by the test: several workers, each writing its
own ledger shard, merged by the driver; one worker killed mid-task and retried; resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from hitrate.evals.benchmarks import canonical_suite  # noqa: E402
from hitrate.evals.ray_executor import run_eval_ray, shard_folder  # noqa: E402
from hitrate.evals.settings import EvalSettings  # noqa: E402
from hitrate.store.ledger import Ledger  # noqa: E402
from runner_fakes import fake_llm_server_module  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks"
# The harness tests' recording OpenAI-compatible server on 127.0.0.1 (the workers reach it over HTTP).
fake = fake_llm_server_module()

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cache = tmp_path_factory.mktemp("suite-cache")
    os.environ["HITRATE_SUITE_CACHE"] = str(cache)  # the driver's conversions
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"HITRATE_SUITE_CACHE": str(cache)}})
    yield
    ray.shutdown()
    os.environ.pop("HITRATE_SUITE_CACHE", None)


class HangOnce:
    """Answers every request with a short text, except the first time a request of the task whose
    instruction contains `marker` reaches its `nth` call: that one hangs (until its worker dies)."""

    def __init__(self, marker: str, nth: int) -> None:
        self.marker, self.nth, self.seen = marker, nth, 0
        self.hanging = threading.Event()

    def __call__(self, record):
        if self.marker in record.body.decode(errors="replace") and not self.hanging.is_set():
            self.seen += 1
            if self.seen == self.nth:
                self.hanging.set()
                return fake.Hang(seconds=120)
        return fake.Reply(text="ok")


def _pid_of_running(shards: Path, task: str, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for shard in shards.glob(f"{task}-*.db"):
            conn = sqlite3.connect(f"file:{shard}?mode=ro", uri=True)
            try:
                rows = conn.execute("SELECT detail FROM tasks WHERE name = ?", (task,)).fetchall()
            except sqlite3.DatabaseError:
                rows = []
            finally:
                conn.close()
            for (detail,) in rows:
                if '"worker_pid"' in detail:
                    return int(json.loads(detail)["worker_pid"])
        time.sleep(0.2)
    raise AssertionError(f"no running shard for {task}")


def test_ray_run_merges_shards_retries_a_killed_worker_and_resumes(cluster, tmp_path):
    answer = HangOnce("Write `convert(number)`", nth=3)
    server = fake.FakeLLMServer(default=answer).start()
    try:
        db = tmp_path / "runs.db"
        settings = EvalSettings(
            suite=canonical_suite(f"aider-polyglot:{FIXTURES / 'aider-polyglot'}"),
            model=f"openai-compat/fake@{server.url}/v1",
            policy="replay",
            task_ids=["python-leap", "python-raindrops"],
        )
        killed: list[int] = []

        def kill_when_hanging(run_id_box: list[str]) -> None:
            assert answer.hanging.wait(120)
            pid = _pid_of_running(shard_folder(db, run_id_box[0]), "python-raindrops")
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        run_id = "01ray0000000000000000000000000001"
        killer = threading.Thread(target=kill_when_hanging, args=([run_id],), daemon=True)
        killer.start()
        result = run_eval_ray(settings, db_path=db, run_id=run_id)
        killer.join(5)
        assert killed, "the worker was never killed"
        assert result.status == "finished" and result.errors == {}
        assert [(r.name, r.outcome) for r in result.results] == [("python-leap", "pass"), ("python-raindrops", "pass")]
        with Ledger(db) as ledger:
            rows = {t.name: t for t in ledger.tasks(run_id=run_id)}
            assert set(rows) == {"python-leap", "python-raindrops"} and all(r.outcome == "pass" for r in rows.values())
            assert ledger.get_run(run_id).status == "finished"
            leap_calls = ledger.calls(task_id=rows["python-leap"].id)
            raindrops_calls = ledger.calls(task_id=rows["python-raindrops"].id)
            # The killed attempt's calls stay recorded next to the retry's own: its two answered
            # calls, and the one it was waiting on when it died (a row still pending, whose error
            # says the process ended before the call finished).
            assert len(raindrops_calls) == len(leap_calls) + 3
            assert len({c.session_id for c in raindrops_calls}) == 2
            [lost] = [c for c in raindrops_calls if c.state == "pending"]
            assert lost.error and "process ended" in lost.error
            assert rows["python-raindrops"].detail["worker_pid"] != killed[0]
        assert not shard_folder(db, run_id).exists()  # every shard merged, then removed

        again = run_eval_ray(None, db_path=db, resume=run_id)
        assert again.status == "finished" and again.results == [] and sorted(again.skipped) == ["python-leap", "python-raindrops"]
    finally:
        server.stop()


class Seen:
    """A run observer that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.finished: list[str] = []
        self.started: tuple[int, int] | None = None

    def run_started(self, run_id, total, skipped):
        self.started = (total, skipped)

    def task_started(self, name):
        pass

    def call_recorded(self, name, event):
        self.calls.append(event.call_id)

    def task_finished(self, result):
        self.finished.append(result.name)


def test_ray_runs_the_swebench_examples_and_retries_an_infra_error(cluster, tmp_path):
    refused = threading.Event()

    def answer(record):
        # The first request of one instance is refused (401): its task ends as an infra error,
        # and the driver runs it again in the same ledger row.
        if "parse_number('-7')" in record.body.decode(errors="replace") and not refused.is_set():
            refused.set()
            return fake.Failure(401, {"error": {"type": "authentication_error", "message": "key rotated"}})
        return fake.Reply(text="ok")

    server = fake.FakeLLMServer(default=answer).start()
    try:
        settings = EvalSettings(
            suite=canonical_suite(f"swebench:{FIXTURES / 'swebench' / 'instances.jsonl'}"),
            repos=str(FIXTURES / "swebench" / "repos"),
            model=f"openai-compat/fake@{server.url}/v1",
            policy="replay",
        )
        seen = Seen()
        result = run_eval_ray(settings, db_path=tmp_path / "runs.db", observer=seen)
        assert result.status == "finished"
        assert [r.outcome for r in result.results] == ["pass", "pass"]
        # The progress bar heard of every call the workers recorded, and of both outcomes.
        with Ledger(tmp_path / "runs.db") as ledger:
            assert sorted(seen.calls) == sorted(c.id for c in ledger.calls(run_id=result.run_id))
        assert sorted(seen.finished) == ["hitrate-fixtures-tinycalc-1", "hitrate-fixtures-tinycalc-2"]
        assert seen.started == (2, 0) and refused.is_set()
        with Ledger(tmp_path / "runs.db") as ledger:
            [row] = [t for t in ledger.tasks(run_id=result.run_id) if t.name == "hitrate-fixtures-tinycalc-2"]
            assert row.outcome == "pass" and [a["outcome"] for a in row.detail["previous_attempts"]] == ["infra_error"]
            calls = ledger.calls(task_id=row.id)
            assert sum(c.error is not None for c in calls) == 1  # the refused call is one ledger row too
    finally:
        server.stop()
