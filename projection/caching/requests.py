"""A request as a provider's cache sees it, independent of the projection and the ledger.

A `CacheRequest` is one model request reduced to what a cache can see: the prompt's sections
(chained hashes, token counts, block layout, the marks it carried), when it started, when its first
token came back, and how much it generated. The projection builds one from a `Prompt`; the what-if
builds them from ledger rows; every cache family steps its state with them.

Section token counts are the projection's estimates. Two requests that share a section hash share
every byte before it, so they also share its estimated prefix length: simulated caches stay
consistent even though the provider's own tokenizer would count a little differently.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

HEAD_KINDS = ("tools", "system", "docs")
"""Section kinds of the static head: the head mark goes on its last markable block."""


class CacheMark(BaseModel):
    """A cache mark on one block of a section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    block: int = Field(ge=0)
    """Block index within the section."""
    ttl: str
    """"5m", "1h" (Anthropic) or "30m" (OpenAI >= 5.6)."""


class CacheSection(BaseModel):
    """One section of a prompt."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    index: int = 0
    hash: str
    """Chained hash: equal hashes mean equal bytes from the prompt's start through this section."""
    tokens: int = Field(ge=0)
    role: str | None = None
    """history / tail: the message's role ("user", "assistant"); None when not recorded."""
    block_tokens: tuple[int, ...] = ()
    """Tokens per block; empty means one block holding the whole section (none if `tokens` is 0)."""
    positions: tuple[int, ...] = ()
    """Anthropic lookback position of each block, counted from the prompt's start. Empty: each
    block is one position after the previous section's last."""
    markable: tuple[bool, ...] = ()
    """Whether a mark may sit on each block; empty means every block may carry one."""
    marks: tuple[CacheMark, ...] = ()
    """Marks the recorded request carried on this section."""

    @model_validator(mode="after")
    def _lists_agree(self) -> "CacheSection":
        n = len(self.block_tokens)
        for name in ("positions", "markable"):
            got = len(getattr(self, name))
            if got and got != (n if n else (1 if self.tokens else 0)):
                raise ValueError(f"section {self.kind}[{self.index}]: {name} has {got} entries for {n or 1} blocks")
        for mark in self.marks:
            if mark.block >= max(n, 1 if self.tokens else 0):
                raise ValueError(f"section {self.kind}[{self.index}]: mark on block {mark.block}, which does not exist")
        return self


class CacheRequest(BaseModel):
    """One recorded request, as a provider's cache sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    session_id: str | None = None
    """Requests of one session follow each other; planning uses the previous one's end."""
    model: str
    """The model the request was sent to. Caches are per model, so a switch misses."""
    started_at: AwareDatetime
    ttft_s: float | None = Field(None, ge=0)
    """Seconds to the first streamed token: a cache entry becomes readable only then."""
    latency_s: float | None = Field(None, ge=0)
    sections: tuple[CacheSection, ...]
    output_tokens: int = Field(0, ge=0)
    token_ids: tuple[int, ...] | None = None
    """Real prompt token ids, when recorded (the local simulator then uses them)."""

    @property
    def prompt_tokens(self) -> int:
        return sum(s.tokens for s in self.sections)

    @property
    def t(self) -> float:
        """Start time in POSIX seconds."""
        return self.started_at.timestamp()

    @property
    def first_token_delay(self) -> float:
        """When its writes become readable, in seconds after the start (0 when nothing was timed)."""
        if self.ttft_s is not None:
            return self.ttft_s
        return self.latency_s or 0.0


@dataclass(frozen=True, slots=True)
class Boundary:
    """The end of one block: a place a cache entry can end."""

    key: str
    """Identity of the prefix ending here (the section hash, plus the block for inner blocks)."""
    section: int
    block: int
    tokens: int
    """Prefix tokens from the prompt's start through this block."""
    position: int
    markable: bool
    last_of_section: bool


def boundaries(request: CacheRequest) -> list[Boundary]:
    """Every block end of the prompt, in order.

    A block inside a section has no hash of its own; it is keyed by the section's hash and its
    index, so two requests agree on it only when the whole section agrees. That can miss a hit
    where a section changed after an inner block, never invent one.
    """
    out: list[Boundary] = []
    before = 0
    position = 0
    for si, section in enumerate(request.sections):
        blocks = list(section.block_tokens) or ([section.tokens] if section.tokens else [])
        running = before
        for j, block_tokens in enumerate(blocks):
            last = j == len(blocks) - 1
            # Block estimates are taken on each block alone; the section's own count is the truth.
            running = before + section.tokens if last else min(running + block_tokens, before + section.tokens)
            position = section.positions[j] if section.positions else position + 1
            markable = section.markable[j] if section.markable else True
            key = section.hash if last else f"{section.hash}#{j}"
            out.append(Boundary(key, si, j, running, position, markable, last))
        before += section.tokens
    return out


def section_ends(request: CacheRequest) -> Iterator[tuple[int, str, int]]:
    """(section index, hash, prefix tokens) for each section end."""
    total = 0
    for si, section in enumerate(request.sections):
        total += section.tokens
        yield si, section.hash, total


def in_order(requests: Sequence[CacheRequest]) -> list[CacheRequest]:
    """Requests by start time (ties keep their given order)."""
    return sorted(requests, key=lambda r: r.started_at)


def head_sections(request: CacheRequest) -> frozenset[int]:
    """Indices of the sections of the static head."""
    return frozenset(i for i, s in enumerate(request.sections) if s.kind in HEAD_KINDS)
