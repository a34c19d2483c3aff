"""The ledger's summaries: totals over calls, per group (session, run, task, model, backend, kind,
day), and totals re-priced at another price table. A mixin of `Ledger`, which supplies the
queries declared below."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict

from hitrate.store.cost import UsageTotals, aggregate, cost
from hitrate.store.ledger_rows import _SUMMARY_SELECT, _iso, _totals_from_row, _where
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord

GroupBy = Literal["session", "run", "task", "model", "backend", "kind", "day"]
_GROUP_COLUMN: dict[str, str] = {
    "session": "session_id",
    "run": "run_id",
    "task": "task_id",
    "model": "model",
    "backend": "backend",
    "kind": "kind",
    # started_at is stored as UTC ISO text, so its first ten characters are the UTC date.
    "day": "substr(started_at, 1, 10)",
}


class GroupSummary(BaseModel):
    """Totals for one group of calls (one session, run, task, model or backend)."""

    model_config = ConfigDict(frozen=True)

    key: str | None
    """The group's id or name (None collects calls without one, e.g. no run)."""
    label: str | None = None
    """A run's label or a task's name, where there is one."""
    outcome: str | None = None
    """A task's outcome (by="task" only)."""
    first_at: datetime | None = None
    last_at: datetime | None = None
    """When the group's first and last calls started."""
    totals: UsageTotals


class LedgerSummaries:
    """Totals and per-group summaries over a ledger's calls."""

    db: Any
    _query: Callable[..., list[dict[str, Any]]]
    calls: Callable[..., list[CallRecord]]
    transaction: Callable[[], AbstractContextManager[Any]]
    _save_snapshot_in_txn: Callable[[PriceTable], None]

    def reprice(self, table: PriceTable, *, run_id: str | None = None, update: bool = False) -> UsageTotals:
        """Totals of the calls (of one run, or all) priced with `table`. With `update=True`
        the rows' cost and snapshot id are rewritten to the new prices."""
        calls = self.calls(run_id=run_id)
        priced = [(c, cost(c.usage, c.model, c.started_at, table).total) for c in calls]
        if update:
            with self.transaction():
                self._save_snapshot_in_txn(table)
                self.db.conn.executemany(
                    "UPDATE calls SET cost_usd = ?, price_snapshot_id = ? WHERE id = ?",
                    [(total, table.id, c.id) for c, total in priced],
                )
        return aggregate((c.usage, total) for c, total in priced)

    # ---- summaries -----------------------------------------------------------------------------

    def totals(self, *, session_id: str | None = None, run_id: str | None = None, task_id: str | None = None) -> UsageTotals:
        """Totals over the calls matching the filters (all calls if none given)."""
        where, params = _where({"session_id": session_id, "run_id": run_id, "task_id": task_id})
        return _totals_from_row(self._query(f"SELECT {_SUMMARY_SELECT} FROM calls {where}", params)[0])

    def summarize(
        self, by: GroupBy = "session", *, run_id: str | None = None, since: datetime | None = None
    ) -> list[GroupSummary]:
        """Totals per session / run / task / model / backend / kind / UTC day, in order of first
        call (by kind: ordinary calls under None, keep-alive warm-ups under "keepalive"). With
        `since`, only calls started at or after it count."""
        if by not in _GROUP_COLUMN:
            raise ValueError(f"cannot group by {by!r}; choose one of {', '.join(_GROUP_COLUMN)}")
        column = _GROUP_COLUMN[by]
        where, params = _where({"run_id": run_id})
        if since is not None:
            where += (" AND " if where else "WHERE ") + "started_at >= ?"
            params.append(_iso(since))
        sql = (
            f"SELECT {column} AS grp, MIN(started_at) AS first_at, MAX(started_at) AS last_at, {_SUMMARY_SELECT} "
            f"FROM calls {where} GROUP BY {column} ORDER BY MIN(started_at), grp"
        )
        labels: dict[str, tuple[str | None, str | None]] = {}
        if by == "run":
            labels = {r["id"]: (r["label"], r["status"]) for r in self._query("SELECT id, label, status FROM runs")}
        elif by == "task":
            labels = {r["id"]: (r["name"], r["outcome"]) for r in self._query("SELECT id, name, outcome FROM tasks")}
        elif by == "session":
            labels = {r["id"]: (r["label"], None) for r in self._query("SELECT id, label FROM sessions")}
        out = []
        for row in self._query(sql, params):
            label, outcome = labels.get(row["grp"], (None, None))
            out.append(
                GroupSummary(
                    key=row["grp"],
                    label=label,
                    outcome=outcome if by == "task" else None,
                    first_at=row["first_at"],
                    last_at=row["last_at"],
                    totals=_totals_from_row(row),
                )
            )
        return out
