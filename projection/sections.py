"""Turning the pieces of a prompt into section bodies (canonical bytes, per-block facts) and chaining them.

A `Body` depends only on its own content, so it is computed once per message and reused for every
later request. A `Section` adds what depends on the prefix (parent hash, cumulative tokens and
positions) and is rebuilt only when something before it changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hitrate.projection.canonical import ROOT_HASH, TokenCounter, canonical_bytes, chain_hash
from hitrate.projection.prompt import Section, SectionKind, Stability
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import (
    AssistantMessage,
    ContextBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
)


@dataclass(frozen=True, slots=True)
class Body:
    """A section's content-only facts."""

    data: bytes
    tokens: int
    block_tokens: tuple[int, ...]
    position_steps: tuple[int, ...]
    """1 where a block starts a new lookback position, 0 where it continues a tool-call/result run."""
    markable: tuple[bool, ...]
    block_start: int = 0
    """Index of the body's first block in its message."""


def _markable(block: object) -> bool:
    # Anthropic refuses cache_control on thinking blocks and on empty text blocks.
    if isinstance(block, ThinkingBlock):
        return False
    if isinstance(block, TextBlock):
        return block.text != ""
    return True


def _steps(blocks: Sequence[object]) -> tuple[int, ...]:
    # A run of consecutive tool_use blocks counts as one lookback position, and so does a run of
    # tool_result blocks (Anthropic's rule).
    steps = []
    previous: type | None = None
    for block in blocks:
        run = type(block) if isinstance(block, (ToolCallBlock, ToolResultBlock)) else None
        steps.append(0 if run is not None and run is previous else 1)
        previous = run
    return tuple(steps)


def message_bodies(message: UserMessage | AssistantMessage, count: TokenCounter) -> list[Body]:
    """The message body (all blocks but frozen context) and one body per frozen ContextBlock."""
    main = [b for b in message.content if not isinstance(b, ContextBlock)]
    dumped = [b.model_dump(mode="json") for b in main]
    block_bytes = [canonical_bytes(d) for d in dumped]
    data = canonical_bytes({"content": dumped, "role": message.role})
    bodies = [
        Body(
            data=data,
            tokens=count(data),
            block_tokens=tuple(count(b) for b in block_bytes),
            position_steps=_steps(main),
            markable=tuple(_markable(b) for b in main),
        )
    ]
    for offset, block in enumerate(message.content[len(main) :]):
        bodies.append(context_body(block, len(main) + offset, count))
    return bodies


def context_body(block: ContextBlock, block_start: int, count: TokenCounter) -> Body:
    data = canonical_bytes(block.model_dump(mode="json"))
    tokens = count(data)
    return Body(data=data, tokens=tokens, block_tokens=(tokens,), position_steps=(1,), markable=(True,), block_start=block_start)


def tools_body(tools: Sequence[ToolSpec], count: TokenCounter) -> Body:
    dumped = [t.model_dump(mode="json") for t in tools]
    data = canonical_bytes(dumped)
    return Body(
        data=data,
        tokens=count(data) if tools else 0,
        block_tokens=tuple(count(canonical_bytes(d)) for d in dumped),
        position_steps=(1,) * len(tools),
        markable=(True,) * len(tools),
    )


def text_body(text: str, count: TokenCounter) -> Body:
    """System or docs text: one block when non-empty, none when empty."""
    data = text.encode("utf-8")
    if not data:
        return Body(data=b"", tokens=0, block_tokens=(), position_steps=(), markable=())
    tokens = count(data)
    return Body(data=data, tokens=tokens, block_tokens=(tokens,), position_steps=(1,), markable=(True,))


def chain(
    body: Body,
    *,
    kind: SectionKind,
    index: int,
    stability: Stability,
    parent: Section | None,
    message_index: int | None = None,
) -> Section:
    """The section for `body` placed after `parent` (None for the first section)."""
    parent_hash = parent.hash if parent is not None else ROOT_HASH
    tokens_before = parent.prefix_tokens if parent is not None else 0
    positions_before = parent.position_end if parent is not None else 0
    positions = []
    at = positions_before
    for step in body.position_steps:
        at += step
        positions.append(at)
    return Section.model_construct(
        kind=kind,
        index=index,
        stability=stability,
        data=body.data,
        tokens=body.tokens,
        prefix_tokens=tokens_before + body.tokens,
        parent_hash=parent_hash,
        hash=chain_hash(parent_hash, body.data),
        message_index=message_index,
        block_start=body.block_start,
        block_tokens=body.block_tokens,
        block_positions=tuple(positions),
        markable=body.markable,
        positions_before=positions_before,
    )
