"""Radix prefix index alone: request lifecycles per second on a fixed multi-turn workload.

Workload: 1,000 conversations x 8 turns sharing one 2,000-token system prefix; user turns of
U(50, 250) tokens and replies of U(100, 300) tokens, ids drawn from a 32k vocabulary with numpy
`default_rng(0)`; 64 conversations active at once, each step picking a random active one for its
next turn (8,000 requests). Turn t's prompt is the system prefix + all earlier turns + the new
user message; afterwards prompt + reply is offered to the cache.

Per request (timed): `begin(prompt)` (match + lock + evict to make room for the unmatched part,
returning the matched page ids) then `finish(lease, prompt + reply)` (insert, allocate pages,
unlock). Building the token lists is the workload driver's job and is not timed.

Reference (SGLang RadixCache, page size 1, same workload on a 2-vCPU machine): 95.6% hit rate and
~3,370 req/s with a 4M-token pool, ~2,700 req/s at 262,144 tokens, ~3,000 req/s at 131,072
(92.8% hit rate). Goal: >= 1.5x those rates at the same or better hit rate.

    .venv/bin/python benchmarks/bench_radix.py [--page-size 1] [--pools 4194304,262144,131072]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from array import array

import numpy as np

from hitrate.engine.radix import RadixCache

SGLANG_REFERENCE = {4_194_304: (3370, 0.956), 262_144: (2700, 0.956), 131_072: (3000, 0.928)}


def build_workload(
    conversations: int = 1000, turns: int = 8, active: int = 64, system_tokens: int = 2000, seed: int = 0
) -> list[tuple[list[int], list[int]]]:
    """The (prompt, reply) pairs in request order."""
    rng = np.random.default_rng(seed)
    vocab = 32_000
    system = rng.integers(0, vocab, system_tokens).tolist()

    def new_conversation() -> dict:
        turns_data = []
        for _ in range(turns):
            user = rng.integers(0, vocab, int(rng.integers(50, 251))).tolist()
            reply = rng.integers(0, vocab, int(rng.integers(100, 301))).tolist()
            turns_data.append((user, reply))
        return {"history": list(system), "turns": turns_data, "next": 0}

    started = min(active, conversations)
    live = [new_conversation() for _ in range(started)]
    requests = []
    while live:
        i = int(rng.integers(len(live)))
        conv = live[i]
        user, reply = conv["turns"][conv["next"]]
        prompt = conv["history"] + user
        requests.append((prompt, reply))
        conv["history"] = prompt + reply
        conv["next"] += 1
        if conv["next"] == turns:
            if started < conversations:
                live[i] = new_conversation()
                started += 1
            else:
                live.pop(i)
    return requests


def run(requests, pool_tokens: int, page_size: int, fresh_ids: bool = False) -> dict:
    cache = RadixCache(pool_tokens // page_size, page_size)
    if fresh_ids:
        # New int objects per request, as a tokenizer returns them: equality can no longer
        # short-circuit on object identity inside list comparisons.
        requests = [(array("q", p).tolist(), r) for p, r in requests]
    sequences = [prompt + reply for prompt, reply in requests]  # what the runner holds at finish
    gc.collect()
    gc.disable()  # the tree is long-lived; cyclic GC passes over it would only add noise
    try:
        per_request = []
        begin_t = 0.0
        clock = time.perf_counter
        start = clock()
        for (prompt, _reply), seq in zip(requests, sequences):
            t0 = clock()
            lease = cache.begin(prompt)
            t1 = clock()
            cache.finish(lease, seq)
            t2 = clock()
            begin_t += t1 - t0
            per_request.append(t2 - t0)
        total = clock() - start
    finally:
        gc.enable()
    stats = cache.stats
    n = len(requests)
    return {
        "pool_tokens": pool_tokens,
        "requests": n,
        "req_per_s": n / total,
        "us_per_request_mean": total / n * 1e6,
        "us_per_request_median": statistics.median(per_request) * 1e6,
        "us_begin_mean": begin_t / n * 1e6,
        "hit_rate": stats.hit_tokens / stats.query_tokens,
        "evicted_tokens": stats.evicted_pages * page_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page-size", type=int, default=1)
    parser.add_argument("--pools", default="4194304,262144,131072", help="comma-separated pool sizes in tokens")
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per pool; the best is reported")
    parser.add_argument("--fresh-ids", action="store_true", help="new int objects per prompt, as from a tokenizer")
    args = parser.parse_args()

    requests = build_workload(conversations=args.conversations)
    prompt_tokens = sum(len(p) for p, _ in requests)
    print(
        f"workload: {len(requests)} requests, {prompt_tokens:,} prompt tokens "
        f"(mean {prompt_tokens / len(requests):,.0f}, max {max(len(p) for p, _ in requests):,}); "
        f"page size {args.page_size}{', fresh int objects per prompt' if args.fresh_ids else ''}"
    )
    header = f"{'pool tokens':>12} {'req/s':>9} {'us/req':>8} {'median':>8} {'begin':>7} {'hit rate':>9} {'evicted tok':>12}  vs SGLang"
    print(header)
    for pool in (int(p) for p in args.pools.split(",")):
        best = max((run(requests, pool, args.page_size, args.fresh_ids) for _ in range(args.repeat)), key=lambda r: r["req_per_s"])
        ref = SGLANG_REFERENCE.get(pool) if args.page_size == 1 and args.conversations == 1000 else None
        versus = (
            f"{best['req_per_s'] / ref[0]:.2f}x rate (ref {ref[0]:,}/s), hit {best['hit_rate']:.1%} vs {ref[1]:.1%}"
            if ref
            else "-"
        )
        print(
            f"{pool:>12,} {best['req_per_s']:>9,.0f} {best['us_per_request_mean']:>8.1f} "
            f"{best['us_per_request_median']:>8.1f} {best['us_begin_mean']:>7.1f} {best['hit_rate']:>9.1%} "
            f"{best['evicted_tokens']:>12,}  {versus}"
        )


if __name__ == "__main__":
    main()
