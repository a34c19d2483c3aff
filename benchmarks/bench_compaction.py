"""Context policies on a long agent session: in the what-if, and on the bundled engine.

1. What-if (`evals.whatif.policies`): a deterministic coding session (a ~5K-token static head, then
   tool rounds whose results add ~2K tokens each) grows to `--growth` times a small window and is
   driven through each policy (none, naive summary, cache-aware, clearing, provider-native), every
   request stepped through Anthropic's and OpenAI's cache rules and priced with the shipped table.
2. Bundled engine: a real session on a tiny random model (the agent's turns replayed from a script,
   the tools run for real) grows past `--engine-growth` times a small `--context-window`, once per
   policy the engine can run (native has no server-side compaction here: it falls back to
   client-side, as the session says). Its measured buckets are priced at Anthropic's and OpenAI's
   rates (cache writes are plain input on OpenAI).

Printed per policy: completed, total cost at each provider's prices, Σ-hit ratio, peak prompt
tokens, the summary calls' cache-read share; then cache-aware / naive for the session, the summary
calls, and the compaction (summary call + the rewrite after it). One run, no timed assertions.

    .venv/bin/python benchmarks/bench_compaction.py
    .venv/bin/python benchmarks/bench_compaction.py --window 40000 --growth 4 --no-engine
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hitrate.evals.whatif.policies import POLICIES, PolicyResult, SessionScript, compare_policies
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock, ToolResultBlock, UserMessage
from hitrate.store.cost import cost
from hitrate.store.prices import PriceTable
from hitrate.store.usage import WRITE_BUCKETS, Usage

SYSTEM = "You are a coding agent. Work in small, verified steps.\n" + "Follow the project's conventions.\n" * 300
TOOLS = [
    ToolSpec(name=name, description=f"{name} tool. " * 40, input_schema={"type": "object", "properties": {"path": {"type": "string"}}})
    for name in ("read_file", "edit_file", "shell", "grep")
]
TARGETS = ["anthropic/claude-sonnet-5", "openai/gpt-5.4"]
SUMMARIZER_SYSTEM = "You summarize conversations between a user and a coding agent."


def generated_script(rounds: int) -> SessionScript:
    pairs = []
    for i in range(rounds):
        call = ToolCallBlock(call_id=f"call-{i}", name="read_file", arguments='{"path": "parser.py"}')
        pairs.append((
            AssistantMessage(content=(TextBlock(text=f"Step {i}: reading the parser again."), call)),
            UserMessage(content=(ToolResultBlock(call_id=call.call_id, content=f"line {i}\n" * 1200),)),
        ))
    opening = UserMessage(content=(TextBlock(text="Make the parser accept unary minus. " * 30),))
    return SessionScript(tools=TOOLS, system=SYSTEM, docs=[], opening=opening, rounds=pairs)


def ratios(results: list[PolicyResult], label: str) -> None:
    by = {(r.policy, r.target): r for r in results}
    for target in {r.target for r in results}:
        aware, naive = by.get(("cache-aware", target)), by.get(("naive", target))
        if aware is None or naive is None or not naive.cost_usd or not naive.summary_cost_usd:
            continue
        compaction = (aware.summary_cost_usd + aware.rewrite_cost_usd) / (naive.summary_cost_usd + naive.rewrite_cost_usd)
        print(f"{label} cache-aware / naive at {target} prices: session {aware.cost_usd / naive.cost_usd:.2f}x, "
              f"summary calls {aware.summary_cost_usd / naive.summary_cost_usd:.2f}x, "
              f"compaction (summary + rewrite) {compaction:.2f}x")


def table(results: list[PolicyResult], title: str) -> None:
    print(f"\n{title}")
    header = f"{'policy':<12} {'prices':<26} {'done':<5} {'calls':>5} {'summ':>4} {'clear':>5} {'cost':>9} {'Σ-hit':>6} {'peak':>7} {'summary read':>12}"
    print(header)
    print("-" * len(header))
    for r in results:
        share = f"{r.summary_read_share:.0%}" if r.summary_read_share is not None else "-"
        print(f"{r.policy:<12} {r.target:<26} {'yes' if r.completed else 'NO':<5} {r.calls:>5} {r.compactions:>4} {r.clearings:>5}"
              f" ${r.cost_usd:>8.4f} {r.hit_ratio:>6.1%} {r.peak_prompt_tokens:>7,} {share:>12}")


# ------------------------------------------------------------------------------------------------
# The bundled engine
# ------------------------------------------------------------------------------------------------


@dataclass
class EngineRun:
    policy: str
    completed: bool
    detail: str
    rows: list


def _as_openai(usage: Usage) -> Usage:
    """OpenAI bills no cache writes: what the engine wrote (pinned) is plain input there."""
    writes = sum(getattr(usage, b) or 0 for b in WRITE_BUCKETS)
    return usage.model_copy(update={"fresh_input": (usage.fresh_input or 0) + writes, **dict.fromkeys(WRITE_BUCKETS, 0)})


def engine_results(run: EngineRun, table_: PriceTable) -> list[PolicyResult]:
    out = []
    for target in TARGETS:
        provider, _, model = target.partition("/")
        total = summaries = rewrites = 0.0
        read = prompt = summary_read = summary_prompt = peak = 0
        after = False
        for row in run.rows:
            usage = _as_openai(row.usage) if provider == "openai" else row.usage
            amount = cost(usage, model, row.started_at, table_).total or 0.0
            total += amount
            read += usage.cache_read or 0
            prompt += usage.prompt_tokens or 0
            peak = max(peak, usage.prompt_tokens or 0)
            summary = row.kind == "compaction"
            if after and not summary:
                rewrites += amount
            after = summary
            if summary:
                summaries += amount
                summary_read += usage.cache_read or 0
                summary_prompt += usage.prompt_tokens or 0
        out.append(PolicyResult(
            policy=run.policy, target=target, completed=run.completed, calls=len(run.rows),
            compactions=sum(1 for r in run.rows if r.kind == "compaction"),
            clearings=sum(1 for r in run.rows if r.miss_reason == "cleared"),
            cost_usd=total, summary_cost_usd=summaries, rewrite_cost_usd=rewrites,
            hit_ratio=read / prompt if prompt else 0.0, peak_prompt_tokens=peak,
            summary_read_share=summary_read / summary_prompt if summary_prompt else None,
        ))
    return out


def run_engine(policies: tuple[str, ...], window: int, growth: float) -> list[EngineRun]:
    from hitrate.engine.tiny import build_tiny_model
    from hitrate.harness.agent import Agent, AgentLimits
    from hitrate.harness.events import EventList
    from hitrate.harness.policy import RecordedToolCall, RecordedTurn, ReplayPolicy
    from hitrate.harness.router import Router
    from hitrate.harness.session import Session, SessionConfig
    from hitrate.harness.session_inputs import session_inputs
    from hitrate.projection.project import Projector
    from hitrate.store.ledger import Ledger
    from hitrate.tools.files import ReadFileTool
    from hitrate.tools.registry import ToolRegistry

    class NaiveSummarySession(Session):
        """The naive summary: a separate summarizer request (own system prompt, no tools)."""

        _naive = False

        def compact(self, cancel=None):  # type: ignore[override]
            self._naive = True
            try:
                return super().compact(cancel)
            finally:
                self._naive = False

        def _project(self):  # type: ignore[override]
            if not self._naive:
                return super()._project()
            return Projector(self.route.rules, session_id=f"{self.id}-summarizer").project(
                model=self.route.model, tools=[], system=SUMMARIZER_SYSTEM, transcript=self.transcript, rules=self.route.rules)

    root = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    model = build_tiny_model(root / "model", "llama", vocab_size=512, hidden=32, layers=2, heads=2, kv_heads=1,
                             max_positions=window + 1024, seed=0)
    ws = root / "ws"
    ws.mkdir()
    for n in range(4):
        (ws / f"mod{n}.py").write_text("".join(f"def f{n}_{k}(x):\n    return x * {k} + {n}\n" for k in range(6)))
    rounds = int(window * growth / 240) + 1  # each round adds ~240 of the tiny tokenizer's tokens
    turns = [RecordedTurn(text=f"Step {i}.", tool_calls=[RecordedToolCall(name="read_file", arguments={"path": f"mod{i % 4}.py"})])
             for i in range(rounds)] + [RecordedTurn(text="All read.")]
    inputs = session_inputs(ws, tools=ToolRegistry([ReadFileTool()]), system="You are a coding agent. Read files when asked.")
    settings = {
        "none": {"compaction": "off", "clear_tool_results": False},
        "naive": {"clear_tool_results": False},
        "cache-aware": {"clear_tool_results": False},
        "clearing": {"clear_tool_results": True},
        "native": {"compaction": "native"},
    }
    runs = []
    route = Router(env={}).resolve(f"local/{model}")
    try:
        for policy in policies:
            cls = NaiveSummarySession if policy == "naive" else Session
            with Ledger(root / f"{policy}.db") as ledger:
                session = cls(route, ws, ledger=ledger, inputs=inputs, sink=EventList(), context=lambda: {"date": "d"},
                              config=SessionConfig(max_output_tokens=12, context_window=window, **settings[policy]),
                              sleep=lambda s: None)
                if policy == "native":
                    print(f"engine, native: {session.native_fallback}")
                result = Agent(session, policy=ReplayPolicy(turns), limits=AgentLimits(max_steps=4 * rounds, show_budget=False)).run(
                    "Read every module, one at a time.")
                runs.append(EngineRun(policy, result.status == "end_turn", result.detail, ledger.calls(session_id=session.id)))
    finally:
        route.close()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=30_000, help="what-if: the model's input window in tokens")
    parser.add_argument("--growth", type=float, default=3.0, help="what-if: how many windows the history grows to")
    parser.add_argument("--threshold", type=float, default=0.8, help="compact at this share of the window")
    parser.add_argument("--context-window", type=int, default=3000, help="engine: the session's window (the model's is 1024 more)")
    parser.add_argument("--engine-growth", type=float, default=3.5, help="engine: how many windows the history grows to")
    parser.add_argument("--no-engine", action="store_true", help="only the what-if")
    args = parser.parse_args()
    prices = PriceTable.default()
    rounds = int(args.window * args.growth / 2_100)
    print(f"what-if session: {rounds} tool rounds (~{rounds * 2_100:,} tokens of history) against a {args.window:,}-token window")
    results = compare_policies(generated_script(rounds), TARGETS, window=args.window, threshold=args.threshold, table=prices)
    table(results, "what-if, per policy and provider prices")
    ratios(results, "what-if")
    if args.no_engine:
        return
    runs = run_engine(POLICIES, args.context_window, args.engine_growth)
    engine = [r for run in runs for r in engine_results(run, prices)]
    table(engine, f"bundled engine (tiny model, {args.context_window:,}-token window), measured buckets at each provider's prices")
    for run in runs:
        if not run.completed:
            print(f"engine, {run.policy}: stopped: {run.detail[:160]}")
    ratios(engine, "engine")


if __name__ == "__main__":
    main()
