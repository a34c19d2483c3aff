"""Provider caching rules as data, and where to put cache marks for each provider.

Anthropic (explicit `cache_control` marks):
- at most `max_marks` (4) marks per request;
- each mark looks back about `lookback` (20) block positions for an entry an earlier request wrote;
  a run of consecutive tool_use blocks is one position, and so is a run of tool_result blocks;
- a mark whose prefix is below the model's minimum cacheable length is silently ignored, so we never
  place one;
- 1h entries must come before 5m entries, so TTLs never increase along the prompt.
Plan: one mark at the end of the static head (tools + system + docs), one on the newest block, and,
when the new turn added more than `lookback` positions since the previous request's end, a bridge
mark on that end (distance 0: its lookback finds the previous entry exactly, and reads are free).

OpenAI >= 5.6 (`prompt_cache_breakpoint`): exact match only, at most 4 written per request, the latest
80 marks searched. Plan: the head, every earlier request's end (kept marked so it is found again),
the newest block; the latest `searched_marks` of them.

OpenAI <= 5.5, DeepSeek, OpenAI-compatible servers and the local engine cache prefixes on their own:
nothing to place; the stable layout alone decides.
"""

from __future__ import annotations

from typing import Iterator, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hitrate.projection.prompt import TTL_SECONDS, Breakpoint, Section, Ttl
from hitrate.projection.transcript import AssistantMessage, Message, UserMessage

Family = Literal["anthropic", "openai_implicit", "openai_breakpoints", "deepseek", "openai_compat", "local"]


class ProviderRules(BaseModel):
    """How one provider / model caches prompts. The per-model minimum comes from the caller's model table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: Family
    """anthropic: explicit marks with lookback; openai_implicit: automatic prefix cache (GPT <= 5.5);
    openai_breakpoints: exact-match marks (GPT >= 5.6); deepseek: persisted prefix units;
    openai_compat: vLLM / SGLang / llama.cpp prefix cache; local: the bundled engine's radix cache."""
    min_cacheable_tokens: int = Field(default=0, ge=0)
    """Shortest prefix the model caches at all (Anthropic 512-4096 by model, OpenAI 1024)."""
    lookback: int = Field(default=20, ge=1)
    """Block positions a mark searches backwards for an existing entry (Anthropic)."""
    max_marks: int = Field(default=4, ge=0)
    """Most marks one request may carry (Anthropic) or write (OpenAI >= 5.6)."""
    searched_marks: int = Field(default=80, ge=1)
    """Most recent marks in a conversation the provider searches (OpenAI >= 5.6)."""
    head_ttl: Ttl | None = None
    """TTL of the mark on the static head. Defaults: anthropic 5m, openai_breakpoints 30m."""
    message_ttl: Ttl | None = None
    """TTL of marks on messages. Must not exceed head_ttl (Anthropic: 1h entries before 5m ones)."""
    implicit_ttl_seconds: int | None = None
    """Expiry assumed for caches without marks. Defaults: openai_implicit 300 (in-memory retention
    is cleared after 5-10 idle minutes; the low end), deepseek 3600 (hours, best effort);
    openai_compat / local: None, i.e. only evicted under memory pressure."""
    prefix_granularity: int = Field(default=1, ge=1)
    """Implicit hits are rounded down to a multiple of this (OpenAI <= 5.5: 128 tokens)."""

    @model_validator(mode="before")
    @classmethod
    def _family_defaults(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        family = data.get("family")
        if family == "anthropic":
            data.setdefault("head_ttl", "5m")
            data.setdefault("message_ttl", "5m")
        elif family == "openai_breakpoints":
            data.setdefault("head_ttl", "30m")
            data.setdefault("message_ttl", "30m")
        elif family == "openai_implicit":
            data.setdefault("implicit_ttl_seconds", 300)
            data.setdefault("prefix_granularity", 128)
        elif family == "deepseek":
            data.setdefault("implicit_ttl_seconds", 3600)
        return data

    @model_validator(mode="after")
    def _ttls_fit_family(self) -> "ProviderRules":
        allowed: dict[str, set[str | None]] = {
            "anthropic": {"5m", "1h"},
            "openai_breakpoints": {"30m"},
        }
        ok = allowed.get(self.family, {None})
        for name in ("head_ttl", "message_ttl"):
            if getattr(self, name) not in ok:
                raise ValueError(f"{self.family}: {name}={getattr(self, name)!r} not one of {sorted(map(str, ok))}")
        if self.head_ttl and self.message_ttl and TTL_SECONDS[self.message_ttl] > TTL_SECONDS[self.head_ttl]:
            raise ValueError("message_ttl longer than head_ttl: 1h entries must come before 5m entries")
        return self

    @property
    def places_marks(self) -> bool:
        return self.family in ("anthropic", "openai_breakpoints")

    @property
    def uses_prompt_cache_key(self) -> bool:
        return self.family in ("openai_implicit", "openai_breakpoints")


class Plan(BaseModel):
    """Planned marks and any remarks worth showing (why a mark was left out)."""

    breakpoints: tuple[Breakpoint, ...]
    notes: tuple[str, ...] = ()


def _mark(sections: Sequence[Section], si: int, j: int, ttl: Ttl, purpose: str) -> Breakpoint:
    s = sections[si]
    return Breakpoint.model_construct(
        section=si,
        kind=s.kind,
        message_index=s.message_index,
        block_index=s.block_start + j,
        ttl=ttl,
        purpose=purpose,
        position=s.block_positions[j],
        prefix_tokens=s.block_prefix_tokens(j),
    )


def _last_markable(sections: Sequence[Section], start: int, stop: int = -1) -> tuple[int, int] | None:
    """(section index, block within section) of the last markable block in sections[stop+1 .. start]."""
    for si in range(start, stop, -1):
        flags = sections[si].markable
        for j in range(len(flags) - 1, -1, -1):
            if flags[j]:
                return si, j
    return None


def head_mark_target(sections: Sequence[Section]) -> tuple[int, int] | None:
    """The last markable block of the static head (docs, else system, else the last tool)."""
    return _last_markable(sections, 2)


def _answered_user_message(messages: Sequence[Message], mi: int | None) -> bool:
    return (
        mi is not None
        and isinstance(messages[mi], UserMessage)
        and mi + 1 < len(messages)
        and isinstance(messages[mi + 1], AssistantMessage)
    )


def _request_ends_newest_first(
    sections: Sequence[Section], messages: Sequence[Message]
) -> Iterator[tuple[int, int] | None]:
    """For every user message an assistant message answered, newest first: its last markable block,
    or None when it has none. Lazy, so the previous request's end costs only a walk back to it."""
    si = len(sections) - 1
    while si > 2:
        mi = sections[si].message_index
        # Walk to the first section of this message.
        first = si
        while first - 1 > 2 and sections[first - 1].message_index == mi:
            first -= 1
        if _answered_user_message(messages, mi):
            yield _last_markable(sections, si, first - 1)
        si = first - 1


def request_ends(sections: Sequence[Section], messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Where earlier requests ended, newest first: the last markable block of every user message that
    an assistant message answered (each request ends with a user turn, and its reply follows it)."""
    return [end for end in _request_ends_newest_first(sections, messages) if end is not None]


def _previous_end(sections: Sequence[Section], messages: Sequence[Message]) -> tuple[int, int] | None:
    """The previous request's end: the last markable block of the newest answered user message."""
    return next(_request_ends_newest_first(sections, messages), None)


def plan_breakpoints(sections: Sequence[Section], messages: Sequence[Message], rules: ProviderRules) -> Plan:
    """Choose cache marks for a prompt's sections under `rules`. Pure: same sections, same plan."""
    if rules.family == "anthropic":
        return _plan_anthropic(sections, messages, rules)
    if rules.family == "openai_breakpoints":
        return _plan_openai_breakpoints(sections, messages, rules)
    return Plan(breakpoints=())


def _plan_anthropic(sections: Sequence[Section], messages: Sequence[Message], rules: ProviderRules) -> Plan:
    assert rules.head_ttl is not None and rules.message_ttl is not None
    minimum = rules.min_cacheable_tokens
    notes: list[str] = []
    marks: list[Breakpoint] = []
    budget = rules.max_marks

    head = head_mark_target(sections)
    if head is not None and budget > 0:
        mark = _mark(sections, *head, rules.head_ttl, "head")
        if mark.prefix_tokens >= minimum:
            marks.append(mark)
        else:
            notes.append(f"static head is {mark.prefix_tokens} tokens, below the {minimum}-token minimum: not marked")

    newest_at = _last_markable(sections, len(sections) - 1, 2)
    if newest_at is None:
        return Plan(breakpoints=tuple(marks), notes=tuple(notes))
    newest = _mark(sections, *newest_at, rules.message_ttl, "newest")
    if newest.prefix_tokens < minimum:
        notes.append(f"prompt is {newest.prefix_tokens} tokens, below the {minimum}-token minimum: nothing cacheable")
        return Plan(breakpoints=tuple(marks), notes=tuple(notes))

    previous = _previous_end(sections, messages)
    if previous is not None and previous != newest_at:
        prev_mark = _mark(sections, *previous, rules.message_ttl, "bridge")
        gap = newest.position - prev_mark.position
        # The previous request wrote its entry at its newest block. If this turn added more positions
        # than the lookback, the newest mark can no longer see it: mark that block again, so its own
        # lookback (distance 0) reads the entry, and the newest mark only writes what is new.
        if gap > rules.lookback and prev_mark.prefix_tokens >= minimum:
            if len(marks) + 2 <= budget:
                marks.append(prev_mark)
            else:
                notes.append(
                    f"turn added {gap} positions (lookback {rules.lookback}) but the mark budget "
                    f"({budget}) leaves no room for a bridge: the previous entry will not be read"
                )
    if len(marks) < budget:
        marks.append(newest)
    else:
        notes.append("mark budget exhausted before the newest message")
    return Plan(breakpoints=tuple(marks), notes=tuple(notes))


def _plan_openai_breakpoints(sections: Sequence[Section], messages: Sequence[Message], rules: ProviderRules) -> Plan:
    assert rules.head_ttl is not None and rules.message_ttl is not None
    minimum = rules.min_cacheable_tokens
    candidates: list[Breakpoint] = []
    head = head_mark_target(sections)
    if head is not None:
        candidates.append(_mark(sections, *head, rules.head_ttl, "head"))
    # Earlier request ends stay marked: an exact-match cache only finds entries where a mark sits.
    for si, j in reversed(request_ends(sections, messages)):
        candidates.append(_mark(sections, si, j, rules.message_ttl, "sticky"))
    newest_at = _last_markable(sections, len(sections) - 1, 2)
    if newest_at is not None:
        newest = _mark(sections, *newest_at, rules.message_ttl, "newest")
        if all((c.section, c.block_index) != (newest.section, newest.block_index) for c in candidates):
            candidates.append(newest)
    kept = [c for c in candidates if c.prefix_tokens >= minimum]
    notes: list[str] = []
    if len(kept) < len(candidates):
        notes.append(f"{len(candidates) - len(kept)} mark(s) below the {minimum}-token minimum left out")
    if len(kept) > rules.searched_marks:
        notes.append(f"only the latest {rules.searched_marks} marks are searched; {len(kept) - rules.searched_marks} dropped")
        kept = kept[-rules.searched_marks :]
    return Plan(breakpoints=tuple(kept), notes=tuple(notes))
