"""Each provider's prompt-cache rules, one module per cache family.

The planner (`projection.breakpoints`), the miss explainer (`projection.explain`), the what-if
replays (`evals`), the TUI's TTL clock and keep-alive (`harness`) all ask these modules; none keeps
a copy. This sub-package imports nothing outside itself.

    family = family_for(CacheRules(family="anthropic", min_cacheable_tokens=1024))
    cache = family.cache()
    outcome = cache.step(request)        # read / written / fresh, with a note
    family.lifetime("5m")                # how long the written entry lives
    family.warming_blocked()             # why a warm-up can never pay, or None
"""

from __future__ import annotations

from hitrate.projection.caching.anthropic import AnthropicFamily
from hitrate.projection.caching.deepseek import DeepSeekFamily
from hitrate.projection.caching.family import CacheFamily, Entry, Outcome
from hitrate.projection.caching.openai_breakpoints import OpenAIBreakpointsFamily
from hitrate.projection.caching.openai_prefix import GeminiFamily, OpenAIImplicitFamily
from hitrate.projection.caching.prefix_server import LocalFamily, OpenAICompatFamily
from hitrate.projection.caching.rules import CacheRules, FamilyName, family_of_mechanism

FAMILIES: dict[str, type[CacheFamily]] = {
    cls.name: cls
    for cls in (
        AnthropicFamily,
        OpenAIImplicitFamily,
        OpenAIBreakpointsFamily,
        DeepSeekFamily,
        GeminiFamily,
        OpenAICompatFamily,
        LocalFamily,
    )
}


def family_for(rules: CacheRules) -> CacheFamily:
    """The family that implements `rules`."""
    return FAMILIES[rules.family](rules)


__all__ = [
    "FAMILIES",
    "CacheFamily",
    "CacheRules",
    "Entry",
    "FamilyName",
    "Outcome",
    "family_for",
    "family_of_mechanism",
]
