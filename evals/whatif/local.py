"""The bundled engine's radix prefix cache, replayed over recorded requests.

The family is `projection.caching.prefix_server` (no clock, free reads and writes); this module
plugs the engine's own index into it, so the replay has the engine's pool and eviction. The engine
matches token ids, not hashes. Requests recorded with their real token ids are replayed
as they are; otherwise each section becomes a run of pseudo token ids derived from its chained hash
(`tokens` ids long), so two requests share pseudo ids exactly where they share sections. The same
`RadixCache` the engine serves from does the matching and the LRU eviction, with a pool of
`pool_tokens`; nothing expires by time. Writes and reads are free: a local backend has no price.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from hitrate.engine.radix import RadixCache
from hitrate.evals.whatif.types import Predicted, SimRequest, replay
from hitrate.projection.caching.prefix_server import PrefixServerCache
from hitrate.projection.caching.requests import CacheRequest


class LocalSimConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    pool_tokens: int = Field(1_000_000, ge=1)
    """KV pool size in tokens: what the cache can hold before evicting least recently used leaves."""
    page_size: int = Field(1, ge=1)
    """Tokens per KV page; matches round down to whole pages."""


def pseudo_token_ids(request: CacheRequest) -> list[int]:
    """Token ids for the radix tree: the recorded ones, or one run per section seeded by its hash.

    A run starts at a 60-bit value taken from the section's chained hash, so sections that differ
    differ at their first id (the radix tree branches there), and equal sections give equal runs.
    """
    if request.token_ids is not None:
        return list(request.token_ids)
    ids: list[int] = []
    for section in request.sections:
        start = int(hashlib.sha256(section.hash.encode("utf-8")).hexdigest()[:15], 16)
        ids.extend(range(start, start + section.tokens))
    return ids


class RadixMatcher:
    """The engine's radix cache as a prefix-server family's index."""

    def __init__(self, config: LocalSimConfig) -> None:
        pages = max(1, config.pool_tokens // config.page_size)
        self.cache = RadixCache(pages, config.page_size)

    def __call__(self, request: CacheRequest) -> int:
        ids = pseudo_token_ids(request)
        # Salted by model: a different model's KV is useless even for identical tokens.
        lease = self.cache.begin(ids, salt=request.model)
        matched = lease.matched
        self.cache.finish(lease, ids)
        return matched


def simulate_local(requests: Sequence[SimRequest], config: LocalSimConfig | None = None) -> list[Predicted]:
    """Predicted buckets for each request (in start order) on the local engine's radix cache."""
    return replay(PrefixServerCache(RadixMatcher(config or LocalSimConfig())), requests)
