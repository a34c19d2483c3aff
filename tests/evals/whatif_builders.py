"""Builders for what-if tests: requests made of named sections, chained like the projection's."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

from hitrate.evals.whatif.types import SimMark, SimRequest, SimSection
from hitrate.store.cost import cost
from hitrate.store.prices import PriceTable
from hitrate.store.usage import Usage

# A Monday, 12:00 UTC: off-peak for DeepSeek's time-of-day prices.
T0 = datetime(2026, 11, 16, 12, 0, tzinfo=timezone.utc)


def chain(parent: str, name: str) -> str:
    return hashlib.sha256((parent + name).encode()).hexdigest()


def request(
    at_s: float,
    sections: list[tuple],
    *,
    model: str = "claude-sonnet-4-6",
    session: str | None = "s1",
    output: int = 0,
    ttft: float = 1.0,
    latency: float | None = None,
    rid: str | None = None,
) -> SimRequest:
    """`sections`: (kind, name, tokens) or (kind, name, tokens, marks) with marks = ttl or
    [(block, ttl), ...], or a dict with SimSection fields plus `name`. Hashes chain the names."""
    built = []
    parent = "0" * 64
    counts: dict[str, int] = {}
    for spec in sections:
        if isinstance(spec, dict):
            spec = dict(spec)
            name = spec.pop("name")
            kind = spec.pop("kind")
            marks = spec.pop("marks", ())
            extra = spec
            tokens = extra.pop("tokens")
        else:
            kind, name, tokens, *rest = spec
            marks = rest[0] if rest else ()
            extra = {}
        if isinstance(marks, str):
            marks = [(max(len(extra.get("block_tokens", ())) - 1, 0), marks)]
        parent = chain(parent, name)
        built.append(
            SimSection(
                kind=kind,
                index=counts.get(kind, 0),
                hash=parent,
                tokens=tokens,
                marks=tuple(m if isinstance(m, SimMark) else SimMark(block=m[0], ttl=m[1]) for m in marks),
                **extra,
            )
        )
        counts[kind] = counts.get(kind, 0) + 1
    return SimRequest(
        id=rid or f"r{at_s:g}-{len(sections)}-{parent[:6]}",
        session_id=session,
        model=model,
        started_at=T0 + timedelta(seconds=at_s),
        ttft_s=ttft,
        latency_s=latency,
        sections=tuple(built),
        output_tokens=output,
    )


def input_equivalent(usages: list[Usage], model: str, table: PriceTable | None = None, at: datetime = T0) -> float:
    """Total cost expressed in tokens of the model's base input price (how §11 states its vectors)."""
    table = table or PriceTable.default()
    total = 0.0
    for usage in usages:
        breakdown = cost(usage, model, at, table)
        assert breakdown.total is not None, breakdown.unpriced_reason
        total += breakdown.input_equivalent_tokens()
    return total
