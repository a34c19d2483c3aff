"""Tool-result clearing in a live session (see `projection.clearing`), as a mixin of `Session`.

Before each call, once the prompt is past half of the compaction threshold, the session plans a
batch of old large tool results to stub and asks the expected-value rule whether the tokens they
remove, over the turns until the next compaction would come anyway, save more than the rewrite of
the history after the first stub. Past the compaction threshold itself, clearing is tried first,
instead of compacting, when it brings the prompt well under the threshold: it rewrites only the
suffix after the first stub and sends no summary request.

The clearing is stored in the transcript log (the stubs, by position), so a resumed session is
rebuilt the same way, and the next call's miss is labelled `cleared`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from hitrate.harness.router import Route
from hitrate.harness.session_inputs import SessionConfig
from hitrate.harness.transcript_log import TranscriptLog
from hitrate.projection.clearing import (
    ClearingDecision,
    TokenPrices,
    cleared,
    decide_clearing,
    horizon,
    plan_clearing,
)
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import AssistantMessage, Transcript
from hitrate.store.cost import cost
from hitrate.store.prices import PriceTable
from hitrate.store.usage import BUCKETS, Usage

CLEAR_FROM = 0.5
"""Consider clearing once the prompt passes this share of the compaction threshold: earlier, the
batch is small and the window far."""
RELIEF = 0.75
"""Past the threshold, clearing replaces the compaction when it brings the prompt under this share
of the threshold (so it buys turns, not one call)."""
MIN_RESULT_TOKENS = 500
"""Smaller results are left alone: a stub saves too little to be worth a rewrite."""
UNPRICED = TokenPrices(read=0.1e-6, write=1e-6, fresh=1e-6)
"""Where no price is known (the bundled engine, self-hosted servers): prefill work, as if a computed
token cost $1/M and a cached one a tenth of it (its attention still costs at every later token)."""


def token_prices(table: PriceTable, model: str, at: datetime, write_bucket: str) -> TokenPrices:
    """The model's per-token prices for a cache read, a cache write (`write_bucket`; plain input on
    prefix caches) and fresh input, at `at`; `UNPRICED` when the table has none."""
    per: dict[str, float] = {}
    for bucket in ("cache_read", write_bucket, "fresh_input"):
        counts = {b: 0 for b in BUCKETS}
        counts[bucket] = 10_000
        total = cost(Usage(**counts), model, at, table).total
        if total is None:
            return UNPRICED
        per[bucket] = total / 10_000
    return TokenPrices(read=per["cache_read"], write=per[write_bucket], fresh=per["fresh_input"])


class SessionClearing:
    """Stubs old large tool results when that pays."""

    route: Route
    config: SessionConfig
    price_table: PriceTable
    transcript: Transcript
    _log: TranscriptLog
    _rewrite: tuple[str, str] | None
    clock: Callable[[], Any]
    context_window: Callable[[], int | None]
    _provider_tokens: Callable[[Prompt], int]
    _previous: Any
    records: list
    last_clearing: ClearingDecision | None = None
    """The last decision taken (shown by the TUI and in tests)."""

    def _token_prices(self) -> TokenPrices:
        bucket = "cache_write_5m" if self.route.explain_rules.places_marks else "fresh_input"
        return token_prices(self.price_table, self.route.model, self.clock(), bucket)

    def _growth_per_turn(self, tokens: int) -> float:
        """How much a turn adds to the prompt: the mean growth between the last few calls that
        returned (a rewrite in between is skipped), else the history's mean per assistant turn."""
        sizes = [r.usage.prompt_tokens for _, r in self.records[-6:] if r.error is None and r.usage.prompt_tokens]
        steps = [b - a for a, b in zip(sizes, sizes[1:] + [tokens]) if b > a]
        if steps:
            return sum(steps) / len(steps)
        turns = max(1, sum(1 for m in self.transcript.messages if isinstance(m, AssistantMessage)))
        return tokens / turns

    def _clear_if_it_pays(self, prompt: Prompt) -> bool:
        """Clear a batch of old tool results before the call about to send `prompt` when the rule
        says so; returns whether the transcript changed."""
        on = self.config.clear_tool_results and self.config.compaction != "off" and not getattr(self, "native_compaction", False)
        window = self.context_window() if on else None
        if window is None or self._previous is None:
            return False
        threshold = self.config.compact_at * window
        tokens = self._provider_tokens(prompt)
        if tokens < CLEAR_FROM * threshold:
            return False
        plan = plan_clearing(self.transcript, keep_recent_tokens=window // 5, min_result_tokens=MIN_RESULT_TOKENS)
        if plan is None:
            return False
        scale = tokens / prompt.total_tokens if prompt.total_tokens else 1.0
        after = tokens - plan.saved_tokens * scale
        if tokens >= threshold:
            # The alternative is compacting now: a summary call plus a rewrite of everything after
            # the head. Clearing rewrites less and sends nothing, if it buys some turns.
            if after > RELIEF * threshold:
                return False
            decision = ClearingDecision(True, f"cleared {len(plan.targets)} tool results instead of compacting",
                                        0.0, 0.0, 0.0)
        else:
            growth = self._growth_per_turn(tokens)
            decision = decide_clearing(plan, horizon_turns=horizon(round(after), window, self.config.compact_at, growth),
                                       prices=self._token_prices())
        self.last_clearing = decision
        if not decision.clear:
            return False
        self.transcript = cleared(self.transcript, plan)
        self._log.clearing([(t.message, t.block) for t in plan.targets], self.transcript)
        self._rewrite = ("cleared", decision.reason)
        return True
