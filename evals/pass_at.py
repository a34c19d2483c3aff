"""pass@k for runs that give a task more than one try (`hitrate eval --tries 2`).

pass@k is the share of scored tasks that passed within their first k tries: with two tries,
pass@1 is what the agent solved alone and pass@2 adds what it fixed after seeing the failing
test output once. The runner records the passing try in the task detail (`pass_try`, and each
try's grading under `tries`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from hitrate.evals.stats import wilson_interval
from hitrate.store.records import TaskRecord


class PassAtK(BaseModel):
    """Tasks that passed within their first k tries, over the scored tasks."""

    k: int
    n_passed: int
    rate: float | None
    ci95: tuple[float, float] | None


def positive_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None


def pass_try(task: TaskRecord) -> int | None:
    """The try (1, 2, ...) on which a passed task passed: the runner's `pass_try`, else the first
    recorded try whose tests resolved; None when neither is recorded."""
    recorded = positive_int(task.detail.get("pass_try"))
    if recorded is not None:
        return recorded
    tries = task.detail.get("tries")
    if isinstance(tries, list):
        for position, entry in enumerate(tries, start=1):
            if isinstance(entry, dict) and entry.get("resolved") is True:
                return positive_int(entry.get("try")) or position
    return None


def pass_at_k(pass_tries: Sequence[int | None], n_scored: int, max_tries: int) -> tuple[list[PassAtK], int]:
    """pass@1 .. pass@max_tries from the passing try of each passed task (None: not recorded,
    counted at max_tries only), and how many passing tries were unknown."""
    unknown = sum(1 for t in pass_tries if t is None)
    # A passed task always counts by max_tries, whatever its record says.
    tries = [max_tries if t is None else min(t, max_tries) for t in pass_tries]
    rows = []
    for k in range(1, max_tries + 1):
        passed = sum(1 for t in tries if t <= k)
        rows.append(PassAtK(k=k, n_passed=passed, rate=passed / n_scored if n_scored else None, ci95=wilson_interval(passed, n_scored)))
    return rows, unknown
