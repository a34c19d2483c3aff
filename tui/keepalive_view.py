"""How the keep-alive warmer's state reads on screen: a full line for the cache panel, a short one for
the status line, and the `/keepalive` report.

Both lines appear only when there is something to say: a warm-up is due or running, keep-alive is
off although a warm-up would pay, it warmed in this idle stretch and has now stopped (and why), or
the user just switched it. An idle session whose prefix is not worth warming shows nothing extra;
`/keepalive` explains why.
"""

from __future__ import annotations

from datetime import datetime

from hitrate.harness.keepalive import KeepAliveDecision, format_clock
from hitrate.tui.figures import SessionFigures, fmt_tokens, fmt_usd


def decision_text(decision: KeepAliveDecision, now: datetime) -> str:
    """What the warmer will do, worded for the app: a warmer that is on but finds nothing worth
    warming says "not warming", not "off" (which only the user's switch means)."""
    if decision.action == "skip":
        return f"not warming: {decision.reason}"
    return decision.render(now)


def _shown(decision: KeepAliveDecision, *, busy: bool, warming: bool, toggled: bool) -> bool:
    if warming:
        return True
    if busy:
        return False  # the turn itself keeps the prefix warm
    return decision.action in ("warm", "wait", "off") or decision.warmups_since > 0 or toggled


def panel_line(decision: KeepAliveDecision, now: datetime, *, busy: bool, warming: bool, toggled: bool) -> str | None:
    """e.g. "keep-alive: next warm in 3:40 (saves ~$0.04)"; None when there is nothing to say."""
    if not _shown(decision, busy=busy, warming=warming, toggled=toggled):
        return None
    if warming:
        return "keep-alive: warming the cached prefix…"
    return f"keep-alive: {decision_text(decision, now)}"


def status_segment(decision: KeepAliveDecision, now: datetime, *, busy: bool, warming: bool, toggled: bool) -> str | None:
    """The status line's short form, e.g. "keep-alive in 3:40" (the panel line has the figures);
    None when there is nothing to say."""
    if not _shown(decision, busy=busy, warming=warming, toggled=toggled):
        return None
    if warming:
        return "keep-alive: warming"
    if decision.action == "wait" and decision.warm_at is not None:
        return f"keep-alive in {format_clock((decision.warm_at - now).total_seconds())}"
    if decision.action == "warm":
        return "keep-alive: due"
    if decision.action == "off":
        return "keep-alive off"
    return "keep-alive stopped" if decision.warmups_since else "keep-alive: not warming"


def keepalive_markdown(decision: KeepAliveDecision, now: datetime, *, enabled: bool, figures: SessionFigures) -> str:
    """The `/keepalive` report: the switch, what the warmer will do and the figures behind it."""
    lines = [f"**Keep-alive** is {'on' if enabled else 'off'} (`/keepalive on|off`): {decision_text(decision, now)}", ""]
    if decision.expires_at is not None:
        tier = f"{decision.ttl_label} entry, " if decision.ttl_label else ""
        lines.append(f"- cached prefix: {tier}gone at {decision.expires_at:%H:%M:%S} UTC without a warm-up"
                     + (f"; warm-up due at {decision.warm_at:%H:%M:%S} UTC" if decision.warm_at is not None else ""))
    if decision.saving_if_back_usd is not None:
        lines += [
            f"- if the next request comes after it expires: {fmt_usd(decision.saving_if_back_usd)} more without a warm-up "
            f"({fmt_tokens(decision.tokens_at_risk)} tokens paid again instead of read)",
            f"- chance it comes while only a warm-up keeps the prefix: {decision.probability_source}",
            f"- one warm-up costs {fmt_usd(decision.warm_cost_usd)}; expected gain {fmt_usd(decision.net_usd)}",
        ]
    warmups = figures.keepalive_calls()
    if warmups:
        spent = [c.cost_usd for c in warmups if c.cost_usd is not None]
        lines.append(f"- warm-ups this session: {len(warmups)}, {fmt_usd(sum(spent) if spent else None)} "
                     f"({decision.warmups_since} since the last request)")
    return "\n".join(lines)
