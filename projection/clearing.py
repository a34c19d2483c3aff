"""Tool-result clearing: the cheap first step before a compaction.

Old, large tool results (a file read twenty turns ago, a long test log) are most of a coding
session's history and rarely needed verbatim again. Clearing replaces each with a short stub that
names what was there (tool, arguments, size), so the model can call the tool again if it needs it.

Clearing is a cache-buster too: every byte after the first cleared result changes, so the next
request writes that suffix again instead of reading it. It is worth it only when the tokens it
removes, no longer read on each later turn, save more than that one rewrite costs: the same
expected-value rule keep-alive applies (`harness.keepalive`). Clearing goes in batches (every
candidate at once) so a session pays one rewrite for many stubs, not one per stub.

    plan = plan_clearing(transcript, keep_recent_tokens=..., min_result_tokens=...)
    decision = decide_clearing(plan, prompt_tokens=..., head_tokens=..., horizon_turns=..., prices=...)
    if decision.clear: transcript = cleared(transcript, plan)

Pure functions of their inputs; prices come in as per-token figures (this module knows no price
table), so the harness, the what-if and the benchmark ask the same rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hitrate.projection.canonical import canonical_bytes, estimate_tokens
from hitrate.projection.transcript import AssistantMessage, ToolCallBlock, ToolResultBlock, Transcript, UserMessage

STUB_PREFIX = "[cleared to save context]"
KEEP_ROUNDS = 2
"""The most recent assistant turns whose tool results are never cleared."""
ARGUMENTS_SHOWN = 200
"""Characters of a call's arguments a stub repeats (enough to name the file or command)."""


@dataclass(frozen=True)
class ClearTarget:
    message: int
    """Index of the user message holding the result."""
    block: int
    """Index of the result among that message's content blocks."""
    call: ToolCallBlock
    tokens: int
    """The result's size (estimated tokens)."""


@dataclass(frozen=True)
class ClearingPlan:
    targets: tuple[ClearTarget, ...]
    saved_tokens: int
    """Tokens the stubs remove from every later request."""
    suffix_tokens: int
    """Tokens from the first cleared result to the end of the history, after clearing: what the
    next request writes again instead of reading."""

    @property
    def first_message(self) -> int:
        return min(t.message for t in self.targets)


def stub(call: ToolCallBlock, tokens: int) -> str:
    """What a cleared result says instead: the tool, its arguments, the size it had."""
    args = call.arguments if len(call.arguments) <= ARGUMENTS_SHOWN else call.arguments[:ARGUMENTS_SHOWN] + "…"
    return f"{STUB_PREFIX} {call.name} {args} returned ~{tokens:,} tokens; call the tool again if they are needed."


def is_stub(result: ToolResultBlock) -> bool:
    return result.content.startswith(STUB_PREFIX)


def _size(value: object, count: Callable[[bytes], int]) -> int:
    return count(canonical_bytes(value))


def plan_clearing(
    transcript: Transcript,
    *,
    keep_recent_tokens: int,
    min_result_tokens: int = 1000,
    count: Callable[[bytes], int] = estimate_tokens,
) -> ClearingPlan | None:
    """Every tool result of at least `min_result_tokens`, not yet cleared, older than the last
    `KEEP_ROUNDS` tool rounds and the most recent `keep_recent_tokens` of the history (those stay
    verbatim: the model is working with them). None when there is nothing worth a stub."""
    messages = transcript.messages
    sizes = [_size(m.model_dump(mode="json"), count) for m in messages]
    # The last KEEP_ROUNDS assistant turns and what follows them stay verbatim whatever their
    # size (the newest results have not even been read yet); older ones too while they fit.
    turns = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)]
    boundary = turns[-KEEP_ROUNDS] if len(turns) >= KEEP_ROUNDS else 0
    recent = sum(sizes[boundary:])
    for i in range(boundary - 1, -1, -1):
        recent += sizes[i]
        if recent > keep_recent_tokens:
            break
        boundary = i
    calls: dict[str, ToolCallBlock] = {}
    targets: list[ClearTarget] = []
    for i, message in enumerate(messages[:boundary]):
        if isinstance(message, AssistantMessage):
            calls.update((c.call_id, c) for c in message.tool_calls)
            continue
        for j, block in enumerate(message.content):
            if not isinstance(block, ToolResultBlock) or is_stub(block) or block.call_id not in calls:
                continue
            tokens = count(block.content.encode("utf-8"))
            if tokens >= min_result_tokens:
                targets.append(ClearTarget(message=i, block=j, call=calls[block.call_id], tokens=tokens))
    if not targets:
        return None
    after = cleared_messages(messages, targets)
    first = min(t.message for t in targets)
    saved = sum(sizes) - sum(_size(m.model_dump(mode="json"), count) for m in after)
    suffix = sum(_size(m.model_dump(mode="json"), count) for m in after[first:])
    return ClearingPlan(targets=tuple(targets), saved_tokens=saved, suffix_tokens=suffix)


def cleared_messages(messages: Sequence[UserMessage | AssistantMessage], targets: Sequence[ClearTarget]) -> list:
    by_message: dict[int, dict[int, ClearTarget]] = {}
    for t in targets:
        by_message.setdefault(t.message, {})[t.block] = t
    out: list[UserMessage | AssistantMessage] = []
    for i, message in enumerate(messages):
        chosen = by_message.get(i)
        if not chosen:
            out.append(message)
            continue
        if not isinstance(message, UserMessage):
            raise ValueError(f"message {i} is not a user message: it holds no tool result to clear")
        content = []
        for j, block in enumerate(message.content):
            target = chosen.get(j)
            if target is None:
                content.append(block)
            elif not isinstance(block, ToolResultBlock) or block.call_id != target.call.call_id:
                raise ValueError(f"block {j} of message {i} is not the result of call {target.call.call_id}")
            else:
                content.append(ToolResultBlock(call_id=block.call_id, content=stub(target.call, target.tokens), is_error=block.is_error))
        out.append(UserMessage(content=tuple(content)))
    return out


def cleared(transcript: Transcript, plan: ClearingPlan) -> Transcript:
    """The transcript with the plan's results replaced by their stubs (every call still answered)."""
    return Transcript(messages=tuple(cleared_messages(transcript.messages, plan.targets)))


@dataclass(frozen=True)
class TokenPrices:
    """USD per token of the three things a request's prompt can be billed as."""

    read: float
    """Read from the cache."""
    write: float
    """Written to the cache (Anthropic: 1.25× input for 5m; prefix caches: plain input, as `fresh`)."""
    fresh: float


@dataclass(frozen=True)
class ClearingDecision:
    clear: bool
    reason: str
    saving_usd: float
    """What the removed tokens would have cost to read over the horizon."""
    rewrite_usd: float
    """What the next request pays extra for writing the suffix again instead of reading it."""
    horizon_turns: float

    @property
    def net_usd(self) -> float:
        return self.saving_usd - self.rewrite_usd


def horizon(prompt_tokens: int, window: int, threshold: float, growth_per_turn: float, *, max_turns: float = 50.0) -> float:
    """Turns the saving accrues over: until the history would reach the compaction threshold
    again (then a compaction replaces it anyway), at least one, at most `max_turns`."""
    room = threshold * window - prompt_tokens
    if growth_per_turn <= 0:
        return max_turns
    return max(1.0, min(max_turns, room / growth_per_turn))


def decide_clearing(
    plan: ClearingPlan | None,
    *,
    horizon_turns: float,
    prices: TokenPrices,
    min_net_saving_usd: float = 0.0,
) -> ClearingDecision:
    """Clear when `horizon_turns` × the removed tokens' read price exceeds the rewrite the clearing
    causes (the suffix written again at `write` instead of read at `read`) by at least
    `min_net_saving_usd`."""
    if plan is None:
        return ClearingDecision(False, "no old tool result is large enough to clear", 0.0, 0.0, horizon_turns)
    saving = horizon_turns * plan.saved_tokens * prices.read
    rewrite = plan.suffix_tokens * max(0.0, prices.write - prices.read)
    n = len(plan.targets)
    what = f"{n} tool result{'s' if n != 1 else ''}, {plan.saved_tokens:,} tokens"
    if saving - rewrite < min_net_saving_usd:
        return ClearingDecision(
            False, f"clearing {what} saves {saving:.4g} over {horizon_turns:.0f} turns, less than the {rewrite:.4g} rewrite",
            saving, rewrite, horizon_turns,
        )
    return ClearingDecision(True, f"cleared {what}: saves {saving:.4g} over {horizon_turns:.0f} turns for a {rewrite:.4g} rewrite",
                            saving, rewrite, horizon_turns)
