"""Idle compaction: compact a session that waits for its user before its cached prefix expires,
when that is cheaper than what the user's return would pay.

A session near its compaction threshold will compact at one of its next requests anyway. If the
user is away past the cache lifetime, that compaction then costs a cold summary request (the whole
history written again, or sent as fresh input) on top of the rewrite. Compacting while the prefix
is still warm reads the history from the cache instead, and the user's return then writes only the
small compacted prompt. The rule, at the keep-alive's decision point (just before the entry that
expires first is gone):

- only a session whose compaction is due within `due_turns` turns qualifies (its prompt plus that
  many turns of growth passes the threshold): compacting earlier than that would trade away
  verbatim context the user did not ask to lose;
- saving, if the user comes back after the expiry (probability `p_away`): the cold rewrite of the
  whole prompt (`P × write`) less the cold rewrite of the compacted one (`S × write`), plus the
  summary call's own cache discount (`P × (write − read)`: warm now, cold later);
- cost: nothing extra when the compaction is due at the next request (the summary only moves
  earlier); otherwise the turns it moves earlier, taken as the saving's share lost:
  `(due − 1) / due_turns` of it;
- compact when `p_away × saving × (1 − early share) ≥ min_net_saving_usd`.

Pure; prices as per-token figures (`projection.clearing.TokenPrices`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hitrate.projection.clearing import TokenPrices


@dataclass(frozen=True)
class IdleCompactionDecision:
    compact: bool
    reason: str
    due_in_turns: float
    """Turns until the threshold compaction would come anyway."""
    saving_usd: float
    """Expected saving (already weighted by `p_away`)."""


def turns_until_due(prompt_tokens: int, threshold_tokens: float, growth_per_turn: float) -> float:
    """Requests until the prompt passes the threshold: 1 means the next request compacts."""
    if prompt_tokens >= threshold_tokens:
        return 1.0
    if growth_per_turn <= 0:
        return math.inf
    return 1.0 + math.ceil((threshold_tokens - prompt_tokens) / growth_per_turn)


def decide_idle_compaction(
    *,
    prompt_tokens: int,
    compacted_tokens: int,
    threshold_tokens: float,
    growth_per_turn: float,
    prices: TokenPrices,
    p_away: float,
    due_turns: int = 3,
    min_net_saving_usd: float = 0.0,
) -> IdleCompactionDecision:
    """Whether to compact the idle session now (see the module docstring)."""
    if not 0 <= p_away <= 1:
        raise ValueError(f"p_away is a probability, not {p_away}")
    due = turns_until_due(prompt_tokens, threshold_tokens, growth_per_turn)
    if due > due_turns:
        return IdleCompactionDecision(False, f"compaction is not due for {due:.0f} turns: nothing to save by compacting early", due, 0.0)
    cold_rewrite = (prompt_tokens - compacted_tokens) * prices.write
    summary_discount = prompt_tokens * max(0.0, prices.write - prices.read)
    early = (due - 1) / due_turns
    saving = p_away * (cold_rewrite + summary_discount) * (1 - early)
    if saving < min_net_saving_usd or saving <= 0:
        return IdleCompactionDecision(False, f"compacting now saves too little ({saving:.4g})", due, saving)
    return IdleCompactionDecision(True, f"compacting before the cache expires saves ~{saving:.4g} if the user is away", due, saving)
