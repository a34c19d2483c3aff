"""What-if replay speed and the cache-aware vs naive cost gap on a synthetic agent run.

A run of `--sessions` agent sessions, each `--turns` requests long: a 12K-token static head
(tools + system), then per turn an assistant reply with a few tool calls and their results, the
dynamic context changing every 5th turn. Every simulator replays it; printed per target:
requests replayed per second, predicted hit ratio and cost, and the naive / cache-aware cost ratio.

    .venv/bin/python benchmarks/bench_whatif.py
    .venv/bin/python benchmarks/bench_whatif.py --sessions 50 --turns 80
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time
from datetime import datetime, timedelta, timezone

from hitrate.evals.whatif.types import SimRequest, SimSection
from hitrate.evals.whatif.compare import WhatIfOptions, parse_target, whatif

T0 = datetime(2026, 11, 16, 12, 0, tzinfo=timezone.utc)


def _h(parent: str, name: str) -> str:
    return hashlib.sha256((parent + name).encode()).hexdigest()


def synthetic_run(sessions: int, turns: int, seed: int = 7) -> list[SimRequest]:
    rng = random.Random(seed)
    requests = []
    for s in range(sessions):
        start = T0 + timedelta(seconds=s * 17)
        head = [("tools", "tools", 4_000, 1), ("system", "system", 8_000, 1), ("docs", "docs", 0, 0)]
        history: list[tuple[str, str, int, int, str]] = [("history", f"s{s}-task", 600, 1, "user")]
        at = 0.0
        for t in range(turns):
            tail = [("tail", f"s{s}-ctx{t // 5}", 60, 1, "user")] if t % 5 == 0 else []
            sections = []
            parent = "0" * 64
            counts: dict[str, int] = {}
            for kind, name, tokens, blocks, *role in [*head, *history, *tail]:
                parent = _h(parent, name)
                sections.append(
                    SimSection(
                        kind=kind, index=counts.get(kind, 0), hash=parent, tokens=tokens, role=(role[0] if role else None),
                        block_tokens=tuple([tokens // blocks] * blocks) if blocks > 1 else (),
                    )
                )
                counts[kind] = counts.get(kind, 0) + 1
            requests.append(
                SimRequest(
                    id=f"s{s}-t{t}", session_id=f"s{s}", model="claude-sonnet-4-6", started_at=start + timedelta(seconds=at),
                    ttft_s=1.2, latency_s=6.0, sections=tuple(sections), output_tokens=300,
                )
            )
            if tail:
                history.append(("history", tail[0][1], 60, 1, "user"))
            calls = rng.randint(1, 4)
            history.append(("history", f"s{s}-a{t}", 80 * calls + 100, calls + 1, "assistant"))
            history.append(("history", f"s{s}-r{t}", rng.randint(200, 3_000), calls, "user"))
            at += rng.uniform(5, 40)
    return requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    requests = synthetic_run(args.sessions, args.turns)
    prompt = sum(r.prompt_tokens for r in requests)
    print(f"{len(requests)} requests, {prompt / 1e6:.1f}M prompt tokens")
    targets = ["anthropic/claude-sonnet-4-6", "openai/gpt-4.1", "openai/gpt-5.6", "deepseek/deepseek-flash", "local"]
    print(f"{'target':32} {'req/s':>9} {'hit ratio':>10} {'cost':>10} {'naive cost':>11} {'naive/aware':>12}")
    for spec in targets:
        target = parse_target(spec)
        t0 = time.perf_counter()
        aware = whatif(requests, target, WhatIfOptions(calibrate=False))
        elapsed = time.perf_counter() - t0
        naive = whatif(requests, target, WhatIfOptions(calibrate=False, naive=True))
        aware_cost, naive_cost = aware.predicted.cost_usd, naive.predicted.cost_usd
        ratio = f"{naive_cost / aware_cost:.2f}x" if aware_cost and naive_cost else "-"
        print(
            f"{spec:32} {len(requests) / elapsed:9.0f} {aware.predicted.hit_ratio:10.1%} "
            f"{'-' if aware_cost is None else f'${aware_cost:.2f}':>10} {'-' if naive_cost is None else f'${naive_cost:.2f}':>11} {ratio:>12}"
        )
        if naive_cost is None:
            print(f"{'':32} naive hit ratio {naive.predicted.hit_ratio:.1%} (no price)")


if __name__ == "__main__":
    main()
