"""DeepSeek's prefix units (`projection.caching.deepseek`), replayed over recorded requests."""

from __future__ import annotations

from collections.abc import Sequence

from hitrate.evals.whatif.types import Predicted, SimRequest, replay
from hitrate.projection.caching.deepseek import DeepSeekCache, DeepSeekSimConfig

__all__ = ["DeepSeekSimConfig", "simulate_deepseek"]


def simulate_deepseek(requests: Sequence[SimRequest], config: DeepSeekSimConfig | None = None) -> list[Predicted]:
    """Predicted buckets for each request (in start order) under DeepSeek's prefix units."""
    return replay(DeepSeekCache(config or DeepSeekSimConfig()), requests)
