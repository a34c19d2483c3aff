"""Cache-aware vs naive layout on the bundled suite, measured end to end on the local engine.

Runs `hitrate demo`'s pipeline (tiny random-weight model, reference tool-call sequences replayed
through the runner, projection, adapter, engine cache, ledger and hidden tests) over the whole
bundled suite, or the demo's subset, and prints per layout: tasks passed, prompt tokens, tokens
read from the cache, the hit ratio, wall time, and the cost of the same token buckets at a cloud
model's prices plus the what-if under Anthropic's own cache rules; then the cache-aware / naive
ratios. One run, no timed assertions.

    .venv/bin/python benchmarks/bench_eval_layouts.py            # the whole bundled suite
    .venv/bin/python benchmarks/bench_eval_layouts.py --demo     # the demo's 6 tasks
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

from hitrate.evals.demo import DEMO_TASKS, LAYOUTS, run_demo
from hitrate.evals.task import bundled_suite_path, load_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", action="store_true", help="only the demo's tasks")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache-dir", type=Path, default=None, help="where the tiny model is built (default: the demo's)")
    args = parser.parse_args()
    tasks = DEMO_TASKS if args.demo else tuple(t.id for t in load_suite(bundled_suite_path()).tasks)
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        started = time.perf_counter()
        result = run_demo(db=Path(tmp) / "bench.db", cache=args.cache_dir, out=io.StringIO(), workers=args.workers, tasks=tasks)
        elapsed = time.perf_counter() - started
    print(f"{len(tasks)} tasks, {args.workers} workers, both layouts in {elapsed:.1f} s")
    for layout in LAYOUTS:
        f = result.figures[layout]
        run = result.runs[layout]
        wall = sum(t.wall_s for t in run.results)
        print(
            f"{layout:<12} passed {f.passed}/{f.tasks}  prompt {f.prompt_tokens:>9,}  read {f.cache_read:>9,}  "
            f"hit {f.hit_ratio or 0:6.1%}  task wall Σ {wall:7.1f} s  "
            f"priced ${f.illustrative_cost_usd or 0:.4f}  anthropic what-if ${f.anthropic_whatif_usd or 0:.4f}"
        )
    aware, naive = (result.figures[k] for k in LAYOUTS)
    a_wall, n_wall = (sum(t.wall_s for t in result.runs[k].results) for k in LAYOUTS)
    print(f"naive / cache-aware: task wall {n_wall / a_wall:.2f}x", end="")
    if aware.illustrative_cost_usd and naive.illustrative_cost_usd:
        print(f", priced cost {naive.illustrative_cost_usd / aware.illustrative_cost_usd:.2f}x", end="")
    if aware.anthropic_whatif_usd and naive.anthropic_whatif_usd:
        print(f", anthropic what-if cost {naive.anthropic_whatif_usd / aware.anthropic_whatif_usd:.2f}x", end="")
    print()
    if result.saving is not None:
        print(f"cache-aware saves {result.saving:.0%} (priced) / {result.whatif_saving or 0:.0%} (anthropic what-if)")


if __name__ == "__main__":
    main()
