"""Compaction policies on a long agent session, priced under each provider's cache rules.

A deterministic coding session (a 5K-token static head, then tool rounds whose results add ~2K
tokens each) grows to `--growth` times a small context window. Each policy drives it to the end:

- none:        never compacts; the session fails at the window;
- naive:       at the threshold, a separate summarizer request (its own system prompt, no tools)
               re-sends the history uncached, then the session goes on compacted;
- cache-aware: at the threshold, the summary request is the session's next request plus the
               instruction at the tail (`projection.compaction`), so it reads the history from the
               cache; the compacted session keeps its static head cached.

Every request is stepped through each provider family's cache (`projection.caching`) and priced with
the store's price table. Printed per policy and provider: completed, total cost, Σ-hit ratio, peak
prompt tokens, the summary calls' cache-read share; then cache-aware / naive. One run, no timed
assertions.

    .venv/bin/python benchmarks/bench_compaction.py
    .venv/bin/python benchmarks/bench_compaction.py --window 40000 --growth 4
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from hitrate.evals.sim_types import predicted
from hitrate.projection.cache_view import cache_request
from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.compaction import compacted, needs_compaction, plan_compaction, summary_transcript
from hitrate.projection.project import Projector
from hitrate.projection.prompt import Prompt
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock, ToolResultBlock, Transcript, UserMessage
from hitrate.store.cost import cost
from hitrate.store.prices import PriceTable

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
SYSTEM = "You are a coding agent. Work in small, verified steps.\n" + "Follow the project's conventions.\n" * 300
SUMMARIZER_SYSTEM = "You summarize conversations between a user and a coding agent."
TOOLS = [
    ToolSpec(name=name, description=f"{name} tool. " * 40, input_schema={"type": "object", "properties": {"path": {"type": "string"}}})
    for name in ("read_file", "edit_file", "shell", "grep")
]
SUMMARY = "Task: make the parser accept unary minus. " * 60
PROVIDERS = {
    "anthropic/claude-sonnet-5": CacheRules(family="anthropic", min_cacheable_tokens=1024),
    "openai/gpt-5.4": CacheRules(family="openai_implicit", min_cacheable_tokens=1024),
}


@dataclass
class Sent:
    prompt: Prompt
    at: datetime
    summary: bool = False


@dataclass
class Run:
    requests: list[Sent] = field(default_factory=list)
    completed: bool = True


def drive(policy: str, rules: CacheRules, window: int, rounds: int, threshold: float) -> Run:
    """The requests one policy sends over the whole session."""
    projector = Projector(rules, session_id="bench")
    naive_projector = Projector(rules, session_id="bench-summarizer")
    transcript = Transcript(messages=(UserMessage(content=(TextBlock(text="Make the parser accept unary minus. " * 30),)),))
    run, at, last = Run(), T0, None
    for i in range(rounds):
        prompt = projector.project(model="m", tools=TOOLS, system=SYSTEM, transcript=transcript, context={"date": "d"})
        if prompt.total_tokens > window:
            run.completed = False  # the provider would answer "prompt is too long"
            return run
        if policy != "none" and last is not None and needs_compaction(prompt.total_tokens, window, threshold=threshold):
            plan = plan_compaction(transcript, keep_recent_tokens=window // 5)
            if plan is not None:
                asked = summary_transcript(transcript, sent=len(last.messages))
                if policy == "naive":
                    summary = naive_projector.project(model="m", tools=[], system=SUMMARIZER_SYSTEM, transcript=asked)
                else:
                    summary = projector.project(model="m", tools=TOOLS, system=SYSTEM, transcript=asked, context={"date": "d"})
                at += timedelta(seconds=20)
                run.requests.append(Sent(summary, at, summary=True))
                transcript = compacted(transcript, plan, SUMMARY)
                prompt = projector.project(model="m", tools=TOOLS, system=SYSTEM, transcript=transcript, context={"date": "d"})
        at += timedelta(seconds=20)
        run.requests.append(Sent(prompt, at))
        last = prompt
        transcript = transcript.freeze_context(prompt.tail)
        call = ToolCallBlock(call_id=f"call-{i}", name="read_file", arguments='{"path": "parser.py"}')
        transcript = transcript.extend(
            [
                AssistantMessage(content=(TextBlock(text=f"Step {i}: reading the parser again."), call)),
                UserMessage(content=(ToolResultBlock(call_id=call.call_id, content=f"line {i}\n" * 1200),)),
            ]
        )
    return run


def price(run: Run, rules: CacheRules, model: str, table: PriceTable) -> tuple[float, float, float, int, float | None]:
    """(total cost, the summary calls' cost, Σ-hit ratio, peak prompt tokens, summary calls' cache-read share)."""
    cache = family_for(rules).cache()
    total = summaries = read = prompt_tokens = 0.0
    summary_read = summary_prompt = 0
    peak = 0
    for sent in run.requests:
        view = cache_request(sent.prompt, started_at=sent.at).model_copy(update={"output_tokens": 800 if sent.summary else 200})
        usage = predicted(view, cache.step(view)).usage
        breakdown = cost(usage, model, sent.at, table)
        total += breakdown.total or 0.0
        read += usage.cache_read or 0
        prompt_tokens += sent.prompt.total_tokens
        peak = max(peak, sent.prompt.total_tokens)
        if sent.summary:
            summaries += breakdown.total or 0.0
            summary_read += usage.cache_read or 0
            summary_prompt += sent.prompt.total_tokens
    share = summary_read / summary_prompt if summary_prompt else None
    return total, summaries, read / prompt_tokens if prompt_tokens else 0.0, peak, share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=30_000, help="the model's input window in tokens (small, to compact often)")
    parser.add_argument("--growth", type=float, default=3.0, help="how many windows the session's history grows to")
    parser.add_argument("--threshold", type=float, default=0.8, help="compact at this share of the window")
    args = parser.parse_args()
    rounds = int(args.window * args.growth / 2_100)
    table = PriceTable.default()
    print(f"session: {rounds} tool rounds (~{rounds * 2_100:,} tokens of history) against a {args.window:,}-token window")
    header = (
        f"{'policy':<12} {'provider':<26} {'done':<5} {'calls':>5} {'cost':>9} {'summaries':>10} {'Σ-hit':>6} {'peak':>7} {'summary read':>12}"
    )
    print(header)
    print("-" * len(header))
    costs: dict[tuple[str, str], tuple[float, float]] = {}
    for policy in ("none", "naive", "cache-aware"):
        for label, rules in PROVIDERS.items():
            run = drive(policy, rules, args.window, rounds, args.threshold)
            total, summaries, hit, peak, share = price(run, rules, label.split("/", 1)[1], table)
            costs[(policy, label)] = (total, summaries)
            shown = f"{share:.0%}" if share is not None else "-"
            print(
                f"{policy:<12} {label:<26} {'yes' if run.completed else 'NO':<5} {len(run.requests):>5} ${total:>8.4f}"
                f" ${summaries:>9.4f} {hit:>6.1%} {peak:>7,} {shown:>12}"
            )
    for label in PROVIDERS:
        (aware, aware_summaries), (naive, naive_summaries) = costs[("cache-aware", label)], costs[("naive", label)]
        print(f"cache-aware / naive on {label}: session {aware / naive:.2f}x, summary calls {aware_summaries / naive_summaries:.2f}x")


if __name__ == "__main__":
    main()
