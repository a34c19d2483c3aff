"""The input and output of a what-if replay: the cache families' request view plus what the ledger
recorded, and predicted billing buckets per request.

A `SimRequest` is a `projection.caching` request (what a provider's cache can see) together with
the buckets and cost the provider really reported. The families step their caches with it; this
module turns each `Outcome` into a fully known `Usage` next to the actual one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from hitrate.projection.caching.family import CacheState, Outcome
from hitrate.projection.caching.requests import (
    HEAD_KINDS,
    Boundary,
    CacheMark,
    CacheRequest,
    CacheSection,
    boundaries,
    in_order,
    section_ends,
)
from hitrate.store.usage import Usage

SimMark = CacheMark
SimSection = CacheSection

__all__ = ["HEAD_KINDS", "Boundary", "SimMark", "SimSection", "SimRequest", "boundaries", "in_order", "section_ends"]


class SimRequest(CacheRequest):
    """One recorded request, with what the provider really billed."""

    actual: Usage | None = None
    """The buckets the provider really reported."""
    actual_cost_usd: float | None = None
    layout: str | None = None
    """The prompt layout the run used ("cache_aware", "naive"), when the ledger recorded one."""


@dataclass(frozen=True, slots=True)
class Predicted:
    """A simulator's answer for one request: the buckets it would be billed, and why."""

    request: CacheRequest
    usage: Usage
    note: str = ""


def billed(fresh: int, read: int, output: int, *, write_5m: int = 0, write_1h: int = 0, write_30m: int = 0) -> Usage:
    """A fully known Usage (every bucket a count, none unknown): simulated calls know everything."""
    return Usage(
        fresh_input=fresh,
        cache_write_5m=write_5m,
        cache_write_30m=write_30m,
        cache_write_1h=write_1h,
        cache_write_12h=0,
        cache_read=read,
        output=output,
    )


def predicted(request: CacheRequest, outcome: Outcome) -> Predicted:
    """A family's outcome for one request as billing buckets."""
    w = outcome.writes
    usage = billed(
        outcome.fresh,
        outcome.read,
        request.output_tokens,
        write_5m=w.get("5m", 0),
        write_1h=w.get("1h", 0),
        write_30m=w.get("30m", 0),
    )
    return Predicted(request, usage, outcome.note)


def replay(cache: CacheState, requests: Sequence[SimRequest]) -> list[Predicted]:
    """Step one cache with every request, in start order."""
    return [predicted(r, cache.step(r)) for r in in_order(requests)]


class SimCall(BaseModel):
    """One request's predicted billing next to what it really had."""

    model_config = ConfigDict(frozen=True)

    request_id: str
    session_id: str | None = None
    started_at: datetime
    predicted: Usage
    predicted_cost_usd: float | None = None
    actual: Usage | None = None
    actual_cost_usd: float | None = None
    note: str = ""
    """Why the prediction came out as it did (e.g. "read 100000 at mark 2", "entry not yet readable")."""
