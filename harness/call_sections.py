"""A projection `Prompt` as the per-section facts the ledger stores for what-if replay.

The session records these on every call (`CallRecord.sections`); the evals what-if reads them back.
They are the cache's own view of the prompt (`projection.cache_view.cache_request`), stored.
"""

from __future__ import annotations

from hitrate.projection.cache_view import cache_request
from hitrate.projection.prompt import Prompt
from hitrate.store.records import CallSection


def call_sections(prompt: Prompt) -> list[CallSection]:
    """Kind, index, chained hash, tokens, per-block tokens / lookback positions / markability, and
    the marks placed, for each section of `prompt`."""
    return [CallSection.model_validate(section.model_dump()) for section in cache_request(prompt).sections]
