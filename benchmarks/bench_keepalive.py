"""What keep-alive policies cost over simulated interactive sessions, priced with the shipped table.

Each session is a run of requests on one cached prefix (Anthropic 5m marks, claude-sonnet-4-6)
separated by human gaps drawn from a seeded mixture of quick follow-ups (20 s-4 min), "read the
diff" pauses (5-9 min) and long absences (20-90 min), in two proportions: a user who often pauses
just past the TTL ("reads diffs": 55/30/15 %) and one who is either quick or gone ("comes and
goes": 55/5/40 %). Between two requests a policy may send warm-ups; the next request then reads
the prefix (hit) or writes it again (miss). Printed per user, prefix size and policy: total cost of
requests + warm-ups, and the ratio to sending no warm-ups at all.

- none:      never warm.
- ping x3:   a fixed ping every 4:55 after each request, three times (a pinging keep-alive).
- hitrate:   `hitrate.harness.keepalive.decide` with its defaults, learning from the gaps seen so far.

    .venv/bin/python benchmarks/bench_keepalive.py [--sessions 200] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hitrate.harness.keepalive import KeepAliveConfig, WarmContext, decide
from hitrate.harness.session_inputs import session_inputs
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.transcript import TextBlock, Transcript, UserMessage
from hitrate.store.prices import PriceTable

MODEL = "claude-sonnet-4-6"
TTL_S = 300.0
T0 = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
RULES = CacheRules(family="anthropic", min_cacheable_tokens=0)


USERS = {"reads diffs": (0.55, 0.30), "comes and goes": (0.55, 0.05)}
"""Share of quick follow-ups and of pauses just past the TTL; the rest are long absences."""


def human_gap(rng: random.Random, quick: float, pause: float) -> float:
    roll = rng.random()
    if roll < quick:
        return rng.uniform(20, 240)
    if roll < quick + pause:
        return rng.uniform(300, 540)
    return rng.uniform(1200, 5400)


def price(tokens: int, rate: float) -> float:
    return tokens * rate / 1e6


def simulate(policy: str, gaps: list[float], prefix: int, prompt, prices: PriceTable) -> float:
    tier = prices.rates_for(MODEL, T0, prefix).tier
    assert tier.read is not None and tier.write_5m is not None
    hit, miss = price(prefix, tier.read), price(prefix, tier.write_5m)
    total = miss  # the first request writes the prefix
    t, seen = T0, []
    for gap in gaps:
        anchor, warmups, next_at = t, 0, t + timedelta(seconds=gap)
        if policy == "ping x3":
            while warmups < 3 and anchor + timedelta(seconds=295) < next_at:
                anchor += timedelta(seconds=295)
                total += hit
                warmups += 1
        elif policy == "hitrate":
            while True:
                context = WarmContext(provider="anthropic", model=MODEL, rules=RULES, prompt=prompt, prompt_tokens=prefix,
                                      refreshed_at=anchor, sent_at=t, warmups_since=warmups, gaps_s=tuple(seen),
                                      warm_output_tokens=0)
                due = decide(context, anchor + timedelta(seconds=1), KeepAliveConfig(), prices)
                if not due.pays or due.warm_at is None or due.warm_at >= next_at:
                    break
                anchor = due.warm_at
                total += due.warm_cost_usd or 0.0
                warmups += 1
        total += hit if anchor + timedelta(seconds=TTL_S) > next_at else miss
        seen.append(gap)
        t = next_at
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--requests", type=int, default=12, help="requests per session")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    prices = PriceTable.default()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = session_inputs(Path(tmp))
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="Why does test_add fail?"),)))
    prompt = Projector(RULES, session_id="bench").project(model=MODEL, tools=inputs.tool_specs, system=inputs.system,
                                                          transcript=transcript, docs=inputs.docs, rules=RULES)
    print(f"{args.sessions} sessions x {args.requests} requests per user, {MODEL}, 5m cache, seed {args.seed}")
    print(f"{'user':<15} {'prefix':>8}  {'policy':<8}  {'cost $':>9}  {'vs none':>8}")
    for user, (quick, pause) in USERS.items():
        rng = random.Random(args.seed)
        sessions = [[human_gap(rng, quick, pause) for _ in range(args.requests - 1)] for _ in range(args.sessions)]
        for prefix in (20_000, 100_000, 400_000):
            base = sum(simulate("none", g, prefix, prompt, prices) for g in sessions)
            for policy in ("none", "ping x3", "hitrate"):
                spent = sum(simulate(policy, g, prefix, prompt, prices) for g in sessions)
                print(f"{user:<15} {prefix:>8,}  {policy:<8}  {spent:>9.2f}  {spent / base:>8.3f}")


if __name__ == "__main__":
    main()
