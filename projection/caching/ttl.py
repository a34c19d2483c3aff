"""TTL classes and how long a cache entry lives: the one table every component reads.

A TTL class is the name a provider gives an entry's lifetime ("5m", "1h" for Anthropic marks, "30m"
for OpenAI GPT-5.6+ breakpoints, "12h" / "24h" for extended retention). The usage buckets carry the
same names (`cache_write_5m`, ...), so one parser serves the ledger, the planner and the clocks.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

TTL_SECONDS: dict[str, int] = {"5m": 300, "30m": 1800, "1h": 3600, "12h": 43200, "24h": 86400}


def ttl_seconds(ttl_class: str) -> int:
    """"5m" -> 300, "1h" -> 3600, "12h" -> 43200; any "<n><s|m|h|d>" is understood."""
    if ttl_class in TTL_SECONDS:
        return TTL_SECONDS[ttl_class]
    match = re.fullmatch(r"(\d+)([smhd])", ttl_class)
    if match is None:
        raise ValueError(f"not a TTL class: {ttl_class!r} (expected e.g. 5m, 1h)")
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def shortest(ttl_classes: tuple[str, ...] | list[str]) -> str:
    """The shortest-lived of several TTL classes (the whole prefix lives only as long as it)."""
    return min(ttl_classes, key=ttl_seconds)


class Lifetime(BaseModel):
    """What a provider documents about the lifetime of one cache entry."""

    model_config = ConfigDict(frozen=True)

    label: str
    """Short text naming the rule, shown next to a countdown (e.g. "5m", "30m min")."""
    guaranteed_s: float | None
    """The entry lives at least this long after the anchoring call started; None: no clock."""
    longest_s: float | None
    """The entry is gone by this many seconds; None: unknown once the guarantee has passed."""
    refreshed_by_any_call: bool
    """True where every call implicitly writes the prefix (automatic caches), so any call anchors
    the clock; False where only a call that read or wrote the cache does (marks)."""
