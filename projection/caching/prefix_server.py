"""Prefix caches of self-hosted servers: vLLM / SGLang / llama.cpp (`openai_compat`) and the bundled
engine's radix cache (`local`).

They match any prefix, write and read for free, and forget only under memory pressure (LRU): there
is no clock, so nothing to count down and nothing to warm. The default cache here keeps every prefix
(an unbounded pool); a replay that wants the engine's real pool and eviction passes its own index
(the what-if plugs in the engine's `RadixCache`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from hitrate.projection.caching.family import CacheFamily, Outcome
from hitrate.projection.caching.requests import CacheRequest, section_ends

Matcher = Callable[[CacheRequest], int]
"""Looks up a request's longest cached prefix in tokens, and stores the request's own prefix."""

class UnboundedPrefixCache:
    """Every prefix ever sent, per model, matched at section ends."""

    def __init__(self) -> None:
        self._ends: set[tuple[str, str]] = set()

    def __call__(self, request: CacheRequest) -> int:
        ends = list(section_ends(request))
        matched = next((tokens for _, h, tokens in reversed(ends) if (request.model, h) in self._ends), 0)
        self._ends.update((request.model, h) for _, h, tokens in ends if tokens > 0)
        return matched


class PrefixServerCache:
    def __init__(self, matcher: Matcher | None = None) -> None:
        self._match = matcher or UnboundedPrefixCache()

    def step(self, request: CacheRequest) -> Outcome:
        # Recorded token ids are the truth where a server reported them; else the section estimates.
        total = len(request.token_ids) if request.token_ids is not None else request.prompt_tokens
        matched = min(self._match(request), total)
        note = f"read {matched}" if matched else "miss: no cached prefix"
        return Outcome(read=matched, fresh=total - matched, note=note)


class _PrefixServerFamily(CacheFamily):
    def cache(self, matcher: Matcher | None = None) -> PrefixServerCache:
        return PrefixServerCache(matcher)

    def no_clock_reason(self) -> str | None:
        return "LRU prefix cache: kept until memory runs short, no TTL"


class OpenAICompatFamily(_PrefixServerFamily):
    name: ClassVar = "openai_compat"

    def warming_blocked(self) -> str | None:
        return "this server's prefix cache is evicted by memory pressure, not by a clock: nothing to warm"


class LocalFamily(_PrefixServerFamily):
    name: ClassVar = "local"

    def warming_blocked(self) -> str | None:
        return "the local engine's prefix cache is evicted by memory pressure, not by a clock: nothing to warm"
