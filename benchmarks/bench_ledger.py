"""Ledger write throughput on a real SQLite file, single process.

Prints rows per second (wall clock, and per CPU-second) for three ways of writing calls
(goal: >= 5,000 rows/s):
  per-call      `Ledger.record_call`, one transaction (one commit) per row
  transaction   `record_call` inside one `Ledger.transaction()`
  batch         `Ledger.record_calls`, one transaction for the whole list
  pending+done  `Ledger.begin_call` before the request, `finish_call` after (what a session does
                for each attempt, so a killed process leaves its row): two commits per row

Usage: python benchmarks/bench_ledger.py [--rows N] [--priced]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hitrate.store.ledger import Ledger
from hitrate.store.normalize import from_anthropic
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord
from hitrate.store.usage import Usage


def make_calls(n: int) -> list[CallRecord]:
    start = datetime.now(timezone.utc)
    raw = {"input_tokens": 412, "cache_creation_input_tokens": 1800, "cache_read_input_tokens": 48_000, "output_tokens": 350}
    usage = from_anthropic(raw)
    hashes = [f"{i:016x}" for i in range(8)]
    return [
        CallRecord(
            run_id="bench-run",
            session_id=f"s{i // 50}",
            backend="anthropic",
            model="claude-opus-5",
            started_at=start + timedelta(milliseconds=i),
            ttft_s=0.4,
            latency_s=3.2,
            section_hashes=hashes,
            usage=usage,
            raw_usage=raw,
            miss_reason="ttl_expired" if i % 10 == 0 else None,
        )
        for i in range(n)
    ]


def timed(label: str, n: int, action) -> float:  # noqa: ANN001
    """Wall-clock rate, plus the rate per second of this process's CPU time: on a shared, busy
    machine the second shows what the code costs, the first what the machine allowed."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    action()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    rate = n / wall
    print(f"{label:<13} {n:>7} rows  {rate:>10,.0f} rows/s wall  {n / max(cpu, 1e-9):>10,.0f} rows/s of CPU time")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000, help="rows per method (default 5000)")
    parser.add_argument("--priced", action="store_true", help="also compute each row's cost from the price table")
    args = parser.parse_args()
    table = PriceTable.default() if args.priced else None

    with tempfile.TemporaryDirectory() as tmp:
        with Ledger(Path(tmp) / "bench.db") as ledger:
            per_call = make_calls(args.rows)
            in_txn = make_calls(args.rows)
            batch = make_calls(args.rows)
            two_step = make_calls(args.rows)

            def one_by_one() -> None:
                for call in per_call:
                    ledger.record_call(call, price_table=table)

            def one_transaction() -> None:
                with ledger.transaction():
                    for call in in_txn:
                        ledger.record_call(call, price_table=table)

            def pending_then_done() -> None:
                for call in two_step:
                    pending = ledger.begin_call(call.model_copy(update={"usage": Usage()}), price_table=table)
                    ledger.finish_call(pending.model_copy(update={"usage": call.usage, "error": None}), price_table=table)

            print(f"ledger write benchmark ({'cost computed per row' if table else 'no cost computed'}), goal >= 5,000 rows/s")
            rates = {
                "per-call": timed("per-call", args.rows, one_by_one),
                "transaction": timed("transaction", args.rows, one_transaction),
                "batch": timed("batch", args.rows, lambda: ledger.record_calls(batch, price_table=table)),
                "pending+done": timed("pending+done", args.rows, pending_then_done),
            }
            assert ledger.count_calls() == 4 * args.rows
    print("per-call meets goal" if rates["per-call"] >= 5000 else "per-call BELOW goal")
    print(f"pending+done / per-call: {rates['pending+done'] / rates['per-call']:.2f}x the rate")


if __name__ == "__main__":
    main()
