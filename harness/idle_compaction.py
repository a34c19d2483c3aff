"""Idle compaction in an interactive sitting (the rule: `projection.idle_compaction`).

Asked at the keep-alive's decision point, when the entry that expires first is about to go (from
the keep-alive's warm time to its expiry): if the session is set to compact when idle
(`SessionConfig.idle_compaction`, the config file's `[compaction] idle`), its compaction is due
within a few turns, and compacting now while the prefix is warm is expected to save more than it
costs, the session compacts instead of warming (the summary call, kind "compaction", reads the
history from the cache). Off by default: it sends a call while the user is away and trades a few
turns of verbatim history for the saving; the TUI's keep-alive panel shows when it would fire.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import TYPE_CHECKING

from hitrate.harness.keepalive import KeepAliveConfig, KeepAliveDecision
from hitrate.projection.idle_compaction import IdleCompactionDecision, decide_idle_compaction

if TYPE_CHECKING:
    from hitrate.harness.session import Session
    from hitrate.store.records import CallRecord

SUMMARY_TOKENS_GUESS = 1500
"""What a summary adds to the compacted prompt, before one was written (the instruction asks for a
working memory of a page or two)."""


def idle_compaction_decision(
    session: "Session", now: datetime, keepalive: KeepAliveDecision, config: KeepAliveConfig
) -> IdleCompactionDecision | None:
    """The decision for `session` at `now`; None when the question does not arise (off, native
    compaction, no window, nothing sent yet, or not at the keep-alive's decision point)."""
    if not session.config.idle_compaction or session.native_compaction or session.config.compaction == "off":
        return None
    window = session.context_window()
    previous = session.last_request
    if window is None or previous is None or keepalive.warm_at is None or keepalive.expires_at is None:
        return None
    if not keepalive.warm_at <= now < keepalive.expires_at:
        return None
    last = next((r for _, r in reversed(session.records) if r.error is None and r.usage.prompt_tokens), None)
    if last is None or last.usage.prompt_tokens is None:
        return None
    tokens = last.usage.prompt_tokens
    scale = tokens / previous.prompt.total_tokens if previous.prompt.total_tokens else 1.0
    head = sum(s.tokens for s in previous.prompt.sections if s.kind in ("tools", "system", "docs"))
    compacted = round(head * scale) + window // 5 + SUMMARY_TOKENS_GUESS
    return decide_idle_compaction(
        prompt_tokens=tokens,
        compacted_tokens=min(tokens, compacted),
        threshold_tokens=session.config.compact_at * window,
        growth_per_turn=session._growth_per_turn(tokens),
        prices=session._token_prices(),
        p_away=1 - config.return_probability,
    )


def compact_if_idle(
    session: "Session", now: datetime, keepalive: KeepAliveDecision, config: KeepAliveConfig,
    cancel: threading.Event | None = None,
) -> "CallRecord | None":
    """Compact now when the decision says so; the summary call's row, else None."""
    decision = idle_compaction_decision(session, now, keepalive, config)
    if decision is None or not decision.compact:
        return None
    return session.compact(cancel)
