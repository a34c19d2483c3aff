"""The wire-neutral Prompt: ordered, hashed sections plus everything an adapter needs to render it.

Layout, always in this order:

    tools -> system -> docs -> history[0..n] -> tail

- `tools`   one section: every ToolSpec, sorted by name, as one canonical JSON array   (static)
- `system`  the rendered system prompt text                                           (static)
- `docs`    project docs (AGENTS.md, CLAUDE.md, README excerpt...) as one text          (session)
- `history` one section per message body, plus one per frozen ContextBlock of a message (session)
- `tail`    the new ContextBlock appended to the newest user message this turn          (turn)

The three head sections are always present (possibly empty) so section indices stay comparable.
Each section's hash is sha256(parent hash + own bytes): two prompts share a prefix exactly up to
the last section whose hashes agree. The tail section's bytes and hash equal those of the history
section it becomes once frozen, so a request's whole prefix reappears unchanged in the next one.

Adapters render from the structured fields (`tools`, `system`, `docs`, `messages`), put cache marks
where `breakpoints` say, and never re-derive layout themselves.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from hitrate.projection.caching.rules import Ttl
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import ContextBlock, Message

SectionKind = Literal["tools", "system", "docs", "history", "tail"]
Stability = Literal["static", "session", "turn"]
HEAD_KINDS: tuple[str, ...] = ("tools", "system", "docs")


class Section(BaseModel):
    """One hashed piece of the prompt."""

    model_config = ConfigDict(frozen=True)

    kind: SectionKind
    index: int
    """Index among sections of the same kind (history sections count 0..n; the others are 0)."""
    stability: Stability
    data: bytes
    """Canonical bytes: JSON for tools and messages, UTF-8 text for system and docs."""
    tokens: int
    """Token estimate of `data`."""
    prefix_tokens: int
    """Token estimate of everything from the start of the prompt through this section."""
    parent_hash: str
    hash: str
    """sha256(parent_hash + data), hex."""
    message_index: int | None = None
    """history / tail: index into Prompt.messages of the message this section belongs to."""
    block_start: int = 0
    """history / tail: index of this section's first block within that message's content. 0 for the
    head sections, so `Breakpoint.block_index - block_start` is a block's index within its section
    for every kind."""
    block_tokens: tuple[int, ...] = ()
    """Token estimate of each block (tools: each tool; system / docs: one block when non-empty)."""
    block_positions: tuple[int, ...] = ()
    """For each block, its cache-lookback position counted from the start of the prompt (1-based).
    A run of consecutive tool calls, or of tool results, shares one position (Anthropic's rule)."""
    markable: tuple[bool, ...] = ()
    """For each block, whether a cache mark may sit on it (not thinking, not empty text)."""
    positions_before: int = 0
    """Lookback positions used by all earlier sections."""

    @property
    def label(self) -> str:
        return f"history[{self.index}]" if self.kind == "history" else self.kind

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

    @property
    def position_end(self) -> int:
        """Position of the last block (equal to the previous section's when this one is empty)."""
        return self.block_positions[-1] if self.block_positions else self.positions_before

    def block_prefix_tokens(self, block: int) -> int:
        """Tokens from the start of the prompt through block `block` of this section."""
        if block >= len(self.block_tokens) - 1:
            return self.prefix_tokens
        before = self.prefix_tokens - self.tokens
        # Block estimates are taken on each block alone; clamp so they never pass the section's end.
        return min(before + sum(self.block_tokens[: block + 1]), self.prefix_tokens)


class Breakpoint(BaseModel):
    """One planned cache mark (Anthropic `cache_control`, OpenAI `prompt_cache_breakpoint`)."""

    model_config = ConfigDict(frozen=True)

    section: int
    """Index into Prompt.sections."""
    kind: SectionKind
    message_index: int | None
    """history / tail marks: index into Prompt.messages."""
    block_index: int
    """tools: index into Prompt.tools; system / docs: 0 (the system or docs text block);
    history / tail: index into Prompt.messages[message_index].content."""
    ttl: Ttl
    purpose: Literal["head", "newest", "bridge", "sticky"]
    """head: end of tools + system + docs; newest: end of the newest message; bridge: keeps the
    previous request's entry within lookback reach; sticky: a previous request's end, kept marked so
    exact-match providers (OpenAI >=5.6) find it again."""
    position: int
    prefix_tokens: int


class Epoch(BaseModel):
    """A stretch of requests with one model, tool set, system prompt and docs.

    A change to any of them starts a new epoch: allowed, but it invalidates the cached prefix, so it
    is recorded with its reason and shown to the user with its cost.
    """

    model_config = ConfigDict(frozen=True)

    number: int
    reason: str
    changes: tuple[str, ...]
    """What changed against the previous epoch: any of "model", "effort", "tools", "system", "docs";
    empty for the first epoch."""
    model: str
    head_hash: str
    """Hash at the end of the docs section: the identity of the static head."""


class Prompt(BaseModel):
    """What one model request is made of, wire-neutral."""

    model_config = ConfigDict(frozen=True)

    sections: tuple[Section, ...]
    breakpoints: tuple[Breakpoint, ...]
    tools: tuple[ToolSpec, ...]
    """Sorted by name."""
    system: str
    docs: str
    messages: tuple[Message, ...]
    """The messages to send. The newest user message already ends with `tail` when there is one."""
    tail: ContextBlock | None
    """Context appended to the newest user message this turn. After sending, the session records it
    with `Transcript.freeze_context(prompt.tail)`."""
    context: dict[str, str]
    """The full current dynamic context (the tail carries only what changed)."""
    model: str
    family: str
    """The provider rules family the breakpoints were planned for."""
    prompt_cache_key: str | None
    """OpenAI routing key, stable for the whole session; None for providers without one."""
    epoch: Epoch
    epoch_started: bool
    """True when this request is the first of its epoch (its head differs from the previous one's)."""
    notes: tuple[str, ...] = ()
    """Planning remarks, e.g. a turn whose new blocks exceed what the mark budget can bridge."""

    @property
    def hash(self) -> str:
        return self.sections[-1].hash

    @property
    def head_hash(self) -> str:
        return self.sections[2].hash

    @property
    def head_tokens(self) -> int:
        return self.sections[2].prefix_tokens

    @property
    def total_tokens(self) -> int:
        return self.sections[-1].prefix_tokens

    @property
    def history(self) -> tuple[Section, ...]:
        return tuple(s for s in self.sections if s.kind == "history")

    @property
    def tail_section(self) -> Section | None:
        last = self.sections[-1]
        return last if last.kind == "tail" else None

    def section_hashes(self) -> list[str]:
        """The chained hashes in order: what the ledger stores to diff requests later."""
        return [s.hash for s in self.sections]
