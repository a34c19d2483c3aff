"""The Ray driver's shard handling, without a cluster: a shard that came back as bytes from a node
without the driver's disk is merged like one on disk, merging twice adds nothing, and a killed
worker's shard (an unfinished row) never overrides the finished one."""

from __future__ import annotations

import sqlite3

from hitrate.evals.ray_executor import _merge_leftovers, _merge_shard, shard_folder
from hitrate.store.ledger import Ledger


def _shard(path, run_id, row_id, outcome, config):
    with Ledger(path) as ledger:
        ledger.start_run("r", config, run_id=run_id)
        ledger.start_task("t1", run_id, task_id=row_id, detail={"n": 1})
        if outcome is not None:
            ledger.finish_task(row_id, outcome, {"n": 2})
    conn = sqlite3.connect(path)
    try:
        return conn.serialize()
    finally:
        conn.close()


def test_shards_merge_from_bytes_idempotently_and_finished_rows_win(tmp_path):
    db = tmp_path / "runs.db"
    config = {"kind": "eval", "settings": {"suite": "s"}}
    with Ledger(db) as ledger:
        run_id = ledger.start_run("r", config).id
    folder = shard_folder(db, run_id)
    remote = tmp_path / "elsewhere.db"
    data = _shard(remote, run_id, "row-1", "pass", config)
    _merge_shard(db, folder / "t1-a.db", data)  # not on the driver's disk: rebuilt from its bytes
    assert not (folder / "t1-a.db").exists()
    killed = folder / "t1-b.db"
    folder.mkdir(parents=True, exist_ok=True)
    _shard(killed, run_id, "row-1", None, config)
    _merge_leftovers(db, folder)
    _merge_shard(db, tmp_path / "again.db", data)  # the same shard twice: nothing changes
    with Ledger(db) as ledger:
        [row] = ledger.tasks(run_id=run_id)
        assert (row.id, row.outcome, row.detail) == ("row-1", "pass", {"n": 2})
        assert ledger.get_run(run_id).config == config
    assert not folder.exists()


def test_a_driver_that_breaks_leaves_its_run_marked_failed(tmp_path, monkeypatch):
    import pytest

    pytest.importorskip("ray")
    from hitrate.evals import ray_executor
    from hitrate.evals.settings import EvalSettings
    from hitrate.evals.task import bundled_suite_path

    def broken(*args, **kwargs):
        raise RuntimeError("the cluster went away")

    monkeypatch.setattr(ray_executor, "_execute", broken)
    settings = EvalSettings(suite=str(bundled_suite_path()), model="openai-compat/fake@http://127.0.0.1:9/v1", policy="replay", task_ids=["roman-parse"])
    with pytest.raises(RuntimeError, match="went away"):
        ray_executor.run_eval_ray(settings, db_path=tmp_path / "runs.db", run_id="01broken00000000000000000000000001")
    with Ledger(tmp_path / "runs.db") as ledger:
        assert ledger.get_run("01broken00000000000000000000000001").status == "failed"
