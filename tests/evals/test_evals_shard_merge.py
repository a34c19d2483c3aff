"""Scale-out: deterministic shards, and merging the shards' ledgers (idempotent)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runner_fakes import FakeRoutes, PrefixCacheBackend

from hitrate.evals.merge import MergeError, merge_ledgers
from hitrate.evals.replay import reference_turns
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.evals.shard import Shard, parse_shard
from hitrate.evals.task import bundled_suite_path, load_suite
from hitrate.store.ledger import Ledger


class Item:
    def __init__(self, id: str) -> None:
        self.id = id


@given(st.sets(st.text(alphabet="abcdefgh-", min_size=1, max_size=6), max_size=40), st.integers(min_value=1, max_value=7))
def test_shards_partition_the_tasks(ids, n):
    items = [Item(i) for i in ids]
    shards = [Shard(index=i, count=n).select(items) for i in range(1, n + 1)]
    picked = [it.id for shard in shards for it in shard]
    assert sorted(picked) == sorted(ids)  # every task in exactly one shard
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    # The split depends only on the ids, not on the order they come in.
    assert [it.id for it in Shard(index=1, count=n).select(list(reversed(items)))] == [it.id for it in shards[0]]


def test_parse_shard():
    assert parse_shard(" 2/4 ") == Shard(index=2, count=4) and str(parse_shard("1/1")) == "1/1"
    for bad in ("0/3", "4/3", "1-3", "", "a/b"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def test_reference_sequence_of_a_multi_file_task():
    task = load_suite(bundled_suite_path()).task("wordcount-cli-flags")
    turns = reference_turns(task)
    calls = [(c.name, c.arguments) for t in turns for c in t.tool_calls]
    solution = sorted(p.relative_to(task.solution_dir).as_posix() for p in task.solution_dir.rglob("*") if p.is_file())
    assert calls[0] == ("list_dir", {"path": "."})
    reads = [a["path"] for n, a in calls if n == "read_file"]
    assert reads == [f for f in solution if (task.workspace_dir / f).is_file()]
    writes = {a["path"]: a["content"] for n, a in calls if n == "write_file"}
    assert sorted(writes) == solution and all(writes[f] == (task.solution_dir / f).read_text() for f in solution)
    assert calls[-1][0] == "shell" and turns[-1].tool_calls == []


def _shard_ledgers(tmp_path):
    suite = bundled_suite_path()
    tasks = ["roman-parse", "lru-recency", "semver-precedence"]
    paths = []
    for index in (1, 2):
        settings = EvalSettings(suite=str(suite), model="openai-compat/fake@http://127.0.0.1:9/v1", policy="replay",
                                task_ids=tasks, shard=f"{index}/2")  # fmt: skip
        db = tmp_path / f"machine{index}.db"
        run = run_eval(settings, db_path=db, routes=FakeRoutes(PrefixCacheBackend()), run_id="shared-run")
        assert run.status == "finished"
        paths.append(db)
    return paths


def _counts(db) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("runs", "tasks", "sessions", "calls")}
    finally:
        conn.close()


def test_merge_unites_shards_and_is_idempotent(tmp_path):
    first, second = _shard_ledgers(tmp_path)
    out = tmp_path / "merged.db"
    result = merge_ledgers(out, [first, second])
    a, b, merged = _counts(first), _counts(second), _counts(out)
    assert merged == {"runs": 1, "tasks": a["tasks"] + b["tasks"], "sessions": a["sessions"] + b["sessions"], "calls": a["calls"] + b["calls"]}
    assert result.tables["calls"].added == merged["calls"] and result.tables["runs"].added == 1
    assert sum(t.conflicts for t in result.tables.values()) == 0
    with Ledger(out) as ledger:
        run = ledger.get_run("shared-run")
        assert run.config["merged_shards"] == ["1/2", "2/2"] and run.status == "finished"
        assert sorted(t.name for t in ledger.tasks(run_id="shared-run")) == ["lru-recency", "roman-parse", "semver-precedence"]
    again = merge_ledgers(out, [first, second, first])
    assert _counts(out) == merged
    assert all(t.added == 0 and t.updated == 0 and t.conflicts == 0 for t in again.tables.values())
    # The inputs were only read.
    assert _counts(first) == a and _counts(second) == b


def test_merge_takes_the_finished_version_of_a_task(tmp_path):
    early = tmp_path / "early.db"
    with Ledger(early) as ledger:
        run = ledger.start_run("r", {})
        task = ledger.start_task("t", run.id)
    late = tmp_path / "late.db"
    late.write_bytes(early.read_bytes())
    with Ledger(late) as ledger:
        ledger.finish_task(task.id, "pass", {"wall_s": 1.0})
    out = tmp_path / "out.db"
    merge_ledgers(out, [early])
    result = merge_ledgers(out, [late])
    assert result.tables["tasks"].updated == 1
    with Ledger(out) as ledger:
        assert ledger.get_task(task.id).outcome == "pass"
    # The unfinished copy does not overwrite the finished row.
    merge_ledgers(out, [early])
    with Ledger(out) as ledger:
        assert ledger.get_task(task.id).outcome == "pass"


def test_merge_refuses_bad_inputs(tmp_path):
    out = tmp_path / "out.db"
    with pytest.raises(MergeError, match="no such ledger"):
        merge_ledgers(out, [tmp_path / "missing.db"])
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    with pytest.raises(MergeError, match="not a readable SQLite ledger"):
        merge_ledgers(out, [junk])
    Ledger(out).close()
    with pytest.raises(MergeError, match="output file"):
        merge_ledgers(out, [out])
    with pytest.raises(MergeError, match="at least one"):
        merge_ledgers(out, [])
