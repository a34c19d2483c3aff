"""OpenAI's prompt caches (two generations) and Gemini's implicit cache, replayed over recorded
requests: the automatic prefix cache (`projection.caching.openai_prefix`) and the exact-match
breakpoints of GPT-5.6+ (`projection.caching.openai_breakpoints`)."""

from __future__ import annotations

from collections.abc import Sequence

from hitrate.evals.whatif.types import Predicted, SimRequest, replay
from hitrate.projection.caching.openai_breakpoints import BreakpointCache, BreakpointSimConfig
from hitrate.projection.caching.openai_prefix import PrefixCache, PrefixSimConfig

__all__ = ["BreakpointSimConfig", "PrefixSimConfig", "simulate_openai_breakpoints", "simulate_prefix_cache"]


def simulate_prefix_cache(requests: Sequence[SimRequest], config: PrefixSimConfig) -> list[Predicted]:
    """Predicted buckets for each request (in start order) under an automatic prefix cache."""
    return replay(PrefixCache(config), requests)


def simulate_openai_breakpoints(requests: Sequence[SimRequest], config: BreakpointSimConfig) -> list[Predicted]:
    """Predicted buckets for each request (in start order) under OpenAI's exact-match breakpoints."""
    return replay(BreakpointCache(config), requests)
