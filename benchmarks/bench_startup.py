"""How long each `hitrate` command takes to start, against a bare interpreter.

Runs each command as a user would (the installed `hitrate` script, a fresh process each time) and
prints the median wall time of several runs and its ratio to `python -c pass` measured in the same
run. Goals on the project's 2-core machine: `hitrate --help` <= 0.5 s, `hitrate ledger` <= 1 s, and
a command given a bad model spec or a missing workspace refuses it in <= 0.5 s.

Usage: python benchmarks/bench_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hitrate.store.ledger import Ledger
from hitrate.store.normalize import from_anthropic
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord, utc_now


def _fill(path: Path, sessions: int = 50, calls: int = 20) -> None:
    table = PriceTable.default()
    raw = {"input_tokens": 412, "cache_creation_input_tokens": 1800, "cache_read_input_tokens": 48_000, "output_tokens": 350}
    with Ledger(path) as ledger, ledger.transaction():
        for s in range(sessions):
            session = ledger.start_session(backend="anthropic", model="claude-sonnet-5")
            for _ in range(calls):
                ledger.record_call(CallRecord(session_id=session.id, backend="anthropic", model="claude-sonnet-5",
                                              started_at=utc_now(), usage=from_anthropic(raw)), price_table=table)


def _time(cmd: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    hitrate = shutil.which("hitrate", path=str(Path(sys.executable).parent)) or shutil.which("hitrate")
    if hitrate is None:
        sys.exit("no `hitrate` script next to this interpreter or on PATH: install the package first")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        _fill(db)
        env = {**os.environ, "HITRATE_DB": str(db), "COLUMNS": "80", "ANTHROPIC_API_KEY": "unused"}
        missing = str(Path(tmp) / "missing")
        baseline = _time([sys.executable, "-c", "pass"], args.runs, env)
        commands = [
            ("hitrate --help", [hitrate, "--help"], 0.5),
            ("hitrate --version", [hitrate, "--version"], None),
            ("hitrate prices", [hitrate, "prices"], None),
            ("hitrate ledger (50 sessions, 1,000 calls)", [hitrate, "ledger"], 1.0),
            ("hitrate ledger --by model", [hitrate, "ledger", "--by", "model"], None),
            ("hitrate run --help", [hitrate, "run", "--help"], None),
            # Bad input is refused before the router and the provider SDKs load.
            ("hitrate run -m gpt-4 (refused)", [hitrate, "run", "-m", "gpt-4", "x"], 0.5),
            ("hitrate run -w /missing (refused)", [hitrate, "run", "-m", "anthropic/claude-sonnet-5", "-w", missing, "x"], 0.5),
            ("hitrate tui -m gpt-4 (refused)", [hitrate, "tui", "-m", "gpt-4"], 0.5),
            ("hitrate tui -w /missing (refused)", [hitrate, "tui", "-m", "anthropic/claude-sonnet-5", "-w", missing], 0.5),
            ("hitrate lint -m gpt-4 (refused)", [hitrate, "lint", "-m", "gpt-4"], 0.5),
            ("hitrate eval basic --model gpt-4 (refused)", [hitrate, "eval", "basic", "--model", "gpt-4"], 0.5),
            ("hitrate whatif --as gpt-4 (refused)", [hitrate, "whatif", "x", "--as", "gpt-4"], 0.5),
        ]
        print(f"median of {args.runs} runs; python -c pass: {baseline * 1000:.0f} ms")
        print(f"{'command':<44} {'time':>8} {'× pass':>8} {'goal':>7}")
        for label, cmd, goal in commands:
            took = _time(cmd, args.runs, env)
            verdict = "" if goal is None else (f"≤{goal:g} s" + (" ok" if took <= goal else " MISSED"))
            print(f"{label:<44} {took * 1000:>6.0f}ms {took / baseline:>8.1f} {verdict:>7}")


if __name__ == "__main__":
    main()
