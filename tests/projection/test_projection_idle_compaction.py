"""Idle compaction: only a session whose compaction is due soon qualifies, and then compacting
while the prefix is warm saves the cold rewrite the user's return would pay."""

from __future__ import annotations

import math

import pytest

from hitrate.projection.clearing import TokenPrices
from hitrate.projection.idle_compaction import decide_idle_compaction, turns_until_due

SONNET = TokenPrices(read=0.30e-6, write=3.75e-6, fresh=3e-6)


def test_turns_until_due() -> None:
    assert turns_until_due(90_000, 80_000, 2_000) == 1
    assert turns_until_due(79_000, 80_000, 2_000) == 2
    assert turns_until_due(70_000, 80_000, 2_000) == 6
    assert turns_until_due(10, 80_000, 0) == math.inf


def test_a_session_at_its_threshold_compacts_when_idle() -> None:
    d = decide_idle_compaction(prompt_tokens=150_000, compacted_tokens=30_000, threshold_tokens=140_000,
                               growth_per_turn=3_000, prices=SONNET, p_away=0.85)
    assert d.compact and d.due_in_turns == 1
    # If away: the cold rewrite of 120k fewer tokens, plus the summary call's own read discount.
    assert d.saving_usd == pytest.approx(0.85 * (120_000 * 3.75e-6 + 150_000 * 3.45e-6))


def test_a_session_far_from_its_threshold_is_left_alone() -> None:
    d = decide_idle_compaction(prompt_tokens=40_000, compacted_tokens=30_000, threshold_tokens=140_000,
                               growth_per_turn=3_000, prices=SONNET, p_away=0.85)
    assert not d.compact and "not due" in d.reason


def test_compacting_a_few_turns_early_counts_the_turns_lost() -> None:
    due_now = decide_idle_compaction(prompt_tokens=139_000, compacted_tokens=30_000, threshold_tokens=140_000,
                                     growth_per_turn=3_000, prices=SONNET, p_away=0.85)
    assert due_now.due_in_turns == 2 and due_now.compact
    full = decide_idle_compaction(prompt_tokens=139_000, compacted_tokens=30_000, threshold_tokens=100_000,
                                  growth_per_turn=3_000, prices=SONNET, p_away=0.85)
    assert due_now.saving_usd == pytest.approx(full.saving_usd * (1 - 1 / 3))
    assert not decide_idle_compaction(prompt_tokens=139_000, compacted_tokens=30_000, threshold_tokens=140_000,
                                      growth_per_turn=3_000, prices=SONNET, p_away=0.0).compact
    with pytest.raises(ValueError):
        decide_idle_compaction(prompt_tokens=1, compacted_tokens=1, threshold_tokens=1, growth_per_turn=1,
                               prices=SONNET, p_away=2)
