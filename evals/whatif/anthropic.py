"""Anthropic's prompt cache (`projection.caching.anthropic`), replayed over recorded requests."""

from __future__ import annotations

from collections.abc import Sequence

from hitrate.evals.whatif.types import Predicted, SimRequest, replay
from hitrate.projection.caching.anthropic import AnthropicCache, AnthropicSimConfig

__all__ = ["AnthropicSimConfig", "simulate_anthropic"]


def simulate_anthropic(requests: Sequence[SimRequest], config: AnthropicSimConfig) -> list[Predicted]:
    """Predicted buckets for each request (in start order) under Anthropic's cache rules."""
    return replay(AnthropicCache(config), requests)
