"""What-if per context policy: one long session driven through each way of keeping it inside its
window, every request stepped through a provider's cache rules and priced.

A `SessionScript` is what the session would say without any compaction: its static head (tools,
system, docs), the opening user turn, then the rounds (assistant turn, the user turn that answers
it). It comes from a recorded session (`script_from_ledger`: every message it stored, before any
compaction or clearing rewrote them) or is generated (the benchmark). Each policy replays it:

- ``none``:        never compacts; fails when a prompt no longer fits the window;
- ``naive``:       at the threshold, a separate summarizer request (its own system prompt, no
                   tools) re-sends the history, which shares no prefix with the session's cache;
- ``cache-aware``: at the threshold, the session's next request plus the instruction at the tail
                   (`projection.compaction`): the history is read from the cache;
- ``clearing``:    cache-aware, and before it old large tool results are stubbed whenever the
                   expected-value rule says so (`projection.clearing`);
- ``native``:      the provider compacts server-side in the request that passes the threshold.
                   Its compaction iteration is billed as the whole context in uncached input plus
                   the summary's output (the Anthropic compaction guide's billing example: the
                   iteration's input is the closed context, with no cache read; OpenAI documents
                   no split, and is modelled the same); afterwards the session goes on from the
                   summary and that turn (the server drops what came before).

The summary text is the same stand-in for every policy (`summary_tokens` long), so the policies
differ only in what they send. Pure and deterministic: same script, same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from pydantic import BaseModel, ConfigDict

from hitrate.evals.whatif.types import billed, predicted
from hitrate.projection.cache_view import cache_request
from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.clearing import TokenPrices, cleared, decide_clearing, horizon, plan_clearing
from hitrate.projection.compaction import SUMMARY_HEADER, compacted, needs_compaction, plan_compaction, summary_transcript
from hitrate.projection.docs import ProjectDoc
from hitrate.projection.project import Projector, SystemPrompt
from hitrate.projection.prompt import Prompt
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, TextBlock, Transcript, UserMessage
from hitrate.store.cost import cost
from hitrate.store.prices import PriceTable
from hitrate.store.usage import BUCKETS, Usage

POLICIES = ("none", "naive", "cache-aware", "clearing", "native")
SUMMARIZER_SYSTEM = "You summarize conversations between a user and a coding agent."
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class SessionScript:
    tools: list[ToolSpec]
    system: SystemPrompt | str
    docs: list[ProjectDoc]
    opening: UserMessage
    rounds: list[tuple[AssistantMessage, UserMessage]]
    gap_s: float = 20.0
    """Seconds between requests."""
    output_tokens: int = 200
    """Output of each agent request."""


@dataclass
class Sent:
    prompt: Prompt
    at: datetime
    summary: bool = False
    uncached: bool = False
    """Billed as fresh input whatever the cache holds (a native compaction iteration)."""
    output: int = 200


@dataclass
class PolicyRun:
    requests: list[Sent] = field(default_factory=list)
    completed: bool = True
    compactions: int = 0
    clearings: int = 0


class PolicyResult(BaseModel):
    """One policy on one provider."""

    model_config = ConfigDict(frozen=True)

    policy: str
    target: str
    completed: bool
    calls: int
    compactions: int
    clearings: int
    cost_usd: float
    summary_cost_usd: float
    rewrite_cost_usd: float
    """The requests right after each compaction: the history written again after the summary."""
    hit_ratio: float
    """Σ read / Σ prompt tokens, over every request."""
    peak_prompt_tokens: int
    summary_read_share: float | None
    """The summary calls' cache read / their prompt tokens (None without summary calls)."""


def token_prices(table: PriceTable, model: str, at: datetime, rules: CacheRules) -> TokenPrices:
    """Per-token read / write / fresh prices of `model` (writes: 5m where marks are placed)."""
    write = "cache_write_5m" if rules.places_marks else "fresh_input"
    per = {}
    for bucket in ("cache_read", write, "fresh_input"):
        counts = dict.fromkeys(BUCKETS, 0)
        counts[bucket] = 10_000
        per[bucket] = (cost(Usage(**counts), model, at, table).total or 0.0) / 10_000
    return TokenPrices(read=per["cache_read"], write=per[write], fresh=per["fresh_input"])


def drive(
    script: SessionScript, policy: str, rules: CacheRules, *, window: int, threshold: float = 0.8,
    summary: str, prices: TokenPrices | None = None,
) -> PolicyRun:
    """The requests `policy` sends over the whole script."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}: one of {', '.join(POLICIES)}")
    projector = Projector(rules, session_id="whatif")
    summarizer = Projector(rules, session_id="whatif-summarizer")

    def project(transcript: Transcript) -> Prompt:
        return projector.project(model="m", tools=script.tools, system=script.system, transcript=transcript,
                                 docs=script.docs, context={"date": "d"})

    transcript = Transcript(messages=(script.opening,))
    run, at, last = PolicyRun(), T0, None
    summary_out = max(1, len(summary) // 4)
    for i in range(len(script.rounds) + 1):
        prompt = project(transcript)
        past = last is not None and needs_compaction(prompt.total_tokens, window, threshold=threshold)
        if policy == "clearing" and last is not None and prompt.total_tokens >= 0.5 * threshold * window:
            plan = plan_clearing(transcript, keep_recent_tokens=window // 5, min_result_tokens=500)
            if plan is not None:
                after = prompt.total_tokens - plan.saved_tokens
                if past:
                    clear = after <= 0.75 * threshold * window
                else:
                    growth = max(1.0, (prompt.total_tokens - last.total_tokens))
                    clear = decide_clearing(plan, horizon_turns=horizon(after, window, threshold, growth),
                                            prices=prices or TokenPrices(0.1e-6, 1e-6, 1e-6)).clear
                if clear:
                    transcript = cleared(transcript, plan)
                    run.clearings += 1
                    prompt = project(transcript)
                    past = needs_compaction(prompt.total_tokens, window, threshold=threshold)
        if policy != "none" and past:
            plan = plan_compaction(transcript, keep_recent_tokens=window // 5)
            if policy == "native":
                # The server compacts everything in front of the reply it is about to write; the
                # reply then goes on from the summary (the compaction block) alone.
                at += timedelta(seconds=script.gap_s)
                run.requests.append(Sent(prompt, at, summary=True, uncached=True, output=summary_out))
                run.compactions += 1
                transcript = Transcript(messages=(UserMessage(content=(TextBlock(text=SUMMARY_HEADER + summary),)),))
                prompt = project(transcript)
            elif plan is not None:
                asked = summary_transcript(transcript, sent=len(last.messages))
                if policy == "naive":
                    request = summarizer.project(model="m", tools=[], system=SUMMARIZER_SYSTEM, transcript=asked)
                else:
                    request = project(asked)
                at += timedelta(seconds=script.gap_s)
                run.requests.append(Sent(request, at, summary=True, output=summary_out))
                run.compactions += 1
                transcript = compacted(transcript, plan, summary)
                prompt = project(transcript)
        if prompt.total_tokens > window:
            run.completed = False  # the provider would answer "prompt is too long"
            return run
        at += timedelta(seconds=script.gap_s)
        run.requests.append(Sent(prompt, at, output=script.output_tokens))
        last = prompt
        transcript = transcript.freeze_context(prompt.tail)
        if i < len(script.rounds):
            transcript = transcript.extend(list(script.rounds[i]))
    return run


def price(run: PolicyRun, policy: str, rules: CacheRules, target: str, model: str, table: PriceTable) -> PolicyResult:
    """Step every request of `run` through one cache of `rules`' family and price it."""
    cache = family_for(rules).cache()
    total = summaries = rewrites = 0.0
    read = prompt_tokens = summary_read = summary_prompt = peak = 0
    after_summary = False
    for sent in run.requests:
        view = cache_request(sent.prompt, started_at=sent.at).model_copy(update={"output_tokens": sent.output})
        if sent.uncached:
            usage = billed(sent.prompt.total_tokens, 0, sent.output)
        else:
            usage = predicted(view, cache.step(view)).usage
        amount = cost(usage, model, sent.at, table).total or 0.0
        total += amount
        read += usage.cache_read or 0
        prompt_tokens += sent.prompt.total_tokens
        peak = max(peak, sent.prompt.total_tokens)
        if after_summary and not sent.summary:
            rewrites += amount
        after_summary = sent.summary
        if sent.summary:
            summaries += amount
            summary_read += usage.cache_read or 0
            summary_prompt += sent.prompt.total_tokens
    return PolicyResult(
        policy=policy, target=target, completed=run.completed, calls=len(run.requests), compactions=run.compactions,
        clearings=run.clearings, cost_usd=total, summary_cost_usd=summaries, rewrite_cost_usd=rewrites,
        hit_ratio=read / prompt_tokens if prompt_tokens else 0.0, peak_prompt_tokens=peak,
        summary_read_share=summary_read / summary_prompt if summary_prompt else None,
    )


# Which cache family each priced provider's requests go through.
TARGET_RULES: dict[str, CacheRules] = {
    "anthropic": CacheRules(family="anthropic", min_cacheable_tokens=1024),
    "openai": CacheRules(family="openai_implicit", min_cacheable_tokens=1024),
}


def compare_policies(
    script: SessionScript, targets: list[str], *, window: int, threshold: float = 0.8, summary_tokens: int = 600,
    table: PriceTable | None = None, policies: tuple[str, ...] = POLICIES,
) -> list[PolicyResult]:
    """Every policy on every target ("anthropic/<model>" or "openai/<model>")."""
    table = table or PriceTable.default()
    summary = ("Task, plan, decisions, files touched, failing tests, what is left. " * 400)[: summary_tokens * 4]
    results: list[PolicyResult] = []
    for policy in policies:
        for target in targets:
            provider, _, model = target.partition("/")
            if provider not in TARGET_RULES or not model:
                raise ValueError(f"what-if target {target!r}: write anthropic/<model> or openai/<model>")
            rules = TARGET_RULES[provider]
            prices = token_prices(table, model, T0, rules)
            run = drive(script, policy, rules, window=window, threshold=threshold, summary=summary, prices=prices)
            results.append(price(run, policy, rules, target, model, table))
    return results


def script_from_transcript_entries(
    messages: list[UserMessage | AssistantMessage], *, tools: list[ToolSpec], system: SystemPrompt | str, docs: list[ProjectDoc]
) -> SessionScript:
    """A script from a session's stored messages in order (compactions and clearings ignored: the
    messages as first added). Dynamic-context blocks are dropped: each policy adds its own."""
    clean: list[UserMessage | AssistantMessage] = []
    for m in messages:
        if isinstance(m, UserMessage):
            content = tuple(b for b in m.content if b.type != "context")
            if not content:
                continue
            m = UserMessage(content=content)
        clean.append(m)
    if not clean or not isinstance(clean[0], UserMessage):
        raise ValueError("the session has no opening user turn to replay")
    rounds = [(a, u) for a, u in zip(clean[1::2], clean[2::2]) if isinstance(a, AssistantMessage) and isinstance(u, UserMessage)]
    return SessionScript(tools=tools, system=system, docs=docs, opening=clean[0], rounds=rounds)
