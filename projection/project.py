"""SystemPromptProjection: (tools, system template, docs, transcript, dynamic context) -> Prompt.

Rendering is a pure function of the inputs: the same inputs give the same bytes, hashes and marks.
A `Projector` lives as long as a session and only adds two things on top of that function:
- caches, so the next request costs work proportional to what is new (message bodies are computed
  once; sections are re-chained only after the first change);
- the epoch record: a change of model, tools, system prompt or docs starts a new, numbered epoch
  with a reason, because it invalidates the cached prefix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence

import jinja2
from pydantic import BaseModel, ConfigDict, Field

from hitrate.projection.breakpoints import plan_breakpoints
from hitrate.projection.caching import CacheRules
from hitrate.projection.epochs import head_changes
from hitrate.projection.canonical import TokenCounter, canonical_json, estimate_tokens
from hitrate.projection.context import context_delta
from hitrate.projection.docs import ProjectDoc, render_docs
from hitrate.projection.prompt import Epoch, Prompt, Section
from hitrate.projection.sections import Body, chain, context_body, message_bodies, text_body, tools_body
from hitrate.projection.tools_spec import ToolSpec, sort_tools
from hitrate.projection.transcript import ContextBlock, Message, Transcript, UserMessage


class ProjectionError(ValueError):
    """Inputs the projection cannot turn into a prompt (the message says which and why)."""


class SystemPrompt(BaseModel):
    """A jinja2 template and its variables. Variables must be stable for the session (no clock, no cwd:
    those belong in the dynamic context), or every request starts a new epoch."""

    model_config = ConfigDict(frozen=True)

    template: str
    variables: dict[str, Any] = Field(default_factory=dict)

    def render(self) -> str:
        try:
            return _compile(self.template).render(**self.variables)
        except jinja2.TemplateError as exc:
            raise ProjectionError(f"system prompt template failed to render: {exc}") from exc


_JINJA = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)


@lru_cache(maxsize=32)
def _compile(template: str) -> jinja2.Template:
    try:
        return _JINJA.from_string(template)
    except jinja2.TemplateSyntaxError as exc:
        raise ProjectionError(f"system prompt template is invalid (line {exc.lineno}): {exc.message}") from exc


@dataclass
class _Entry:
    """Cached facts for one transcript message."""

    message: Message
    bodies: list[Body]
    sections: tuple[Section, ...]
    context_after: dict[str, str]
    """The dynamic context the model had seen once this message was sent."""


@dataclass
class _Head:
    tools_in: tuple[ToolSpec, ...]
    system: str
    docs: str
    tools: tuple[ToolSpec, ...]
    sections: tuple[Section, Section, Section]


@dataclass
class _Cache:
    head: _Head | None = None
    entries: list[_Entry] = field(default_factory=list)
    system_key: tuple[str, str] | None = None
    system_text: str = ""
    docs_in: tuple[ProjectDoc, ...] | None = None
    docs_text: str = ""


def _describe_tool_change(old: Sequence[ToolSpec], new: Sequence[ToolSpec]) -> str:
    before = {t.name: t for t in old}
    after = {t.name: t for t in new}
    parts = [f"+{n}" for n in after if n not in before]
    parts += [f"-{n}" for n in before if n not in after]
    parts += [f"~{n}" for n in after if n in before and before[n] != after[n]]
    return "tools changed (" + " ".join(sorted(parts)) + ")"


class Projector:
    """Builds each request of one session; keeps caches and the session's epochs."""

    def __init__(
        self,
        rules: CacheRules,
        *,
        session_id: str | None = None,
        token_counter: TokenCounter = estimate_tokens,
    ) -> None:
        self.rules = rules
        self.session_id = session_id
        self._count = token_counter
        self._cache = _Cache()
        self._epochs: list[Epoch] = []
        self._last: tuple[str, _Head, str | None] | None = None
        """The model and head of the previous request, to tell when an epoch starts."""

    @property
    def epochs(self) -> tuple[Epoch, ...]:
        return tuple(self._epochs)

    # -- head -------------------------------------------------------------------------------------

    def _system_text(self, system: SystemPrompt | str) -> str:
        if isinstance(system, str):
            return system
        if not isinstance(system, SystemPrompt):
            raise ProjectionError(f"system must be a SystemPrompt or str, not {type(system).__name__}")
        key = (system.template, canonical_json_or_repr(system.variables))
        if self._cache.system_key != key:
            self._cache.system_text = system.render()
            self._cache.system_key = key
        return self._cache.system_text

    def _docs_text(self, docs: Sequence[ProjectDoc] | str) -> str:
        if isinstance(docs, str):
            return docs
        docs = tuple(docs)
        cached = self._cache.docs_in
        if cached is None or len(cached) != len(docs) or any(a is not b for a, b in zip(cached, docs)):
            for doc in docs:
                if not isinstance(doc, ProjectDoc):
                    raise ProjectionError(f"docs must be ProjectDoc items, not {type(doc).__name__}")
            self._cache.docs_text = render_docs(docs)
            self._cache.docs_in = docs
        return self._cache.docs_text

    def _head(self, tools: Sequence[ToolSpec], system: str, docs: str) -> _Head:
        tools_in = tuple(tools)
        head = self._cache.head
        if (
            head is not None
            and head.system == system
            and head.docs == docs
            and len(head.tools_in) == len(tools_in)
            and all(a is b for a, b in zip(head.tools_in, tools_in))
        ):
            return head
        for tool in tools_in:
            if not isinstance(tool, ToolSpec):
                raise ProjectionError(f"tools must be ToolSpec items, not {type(tool).__name__}")
        try:
            ordered = tuple(sort_tools(tools_in))
        except ValueError as exc:
            raise ProjectionError(str(exc)) from exc
        s_tools = chain(tools_body(ordered, self._count), kind="tools", index=0, stability="static", parent=None)
        s_system = chain(text_body(system, self._count), kind="system", index=0, stability="static", parent=s_tools)
        s_docs = chain(text_body(docs, self._count), kind="docs", index=0, stability="session", parent=s_system)
        head = _Head(tools_in=tools_in, system=system, docs=docs, tools=ordered, sections=(s_tools, s_system, s_docs))
        self._cache.head = head
        return head

    # -- history ----------------------------------------------------------------------------------

    def _bodies(self, message: Message, old: _Entry | None) -> list[Body]:
        if old is not None:
            if old.message is message:
                return old.bodies
            # Freezing context only appends blocks to the newest user message: reuse what was there.
            n = len(old.message.content)
            if (
                isinstance(message, UserMessage)
                and isinstance(old.message, UserMessage)
                and len(message.content) > n
                and all(a is b for a, b in zip(old.message.content, message.content[:n]))
                and all(isinstance(b, ContextBlock) for b in message.content[n:])
            ):
                extra = [context_body(b, n + k, self._count) for k, b in enumerate(message.content[n:])]
                return old.bodies + extra
        return message_bodies(message, self._count)

    def _entry(
        self, i: int, message: Message, old: _Entry | None, parent: Section, first_index: int, context: dict[str, str]
    ) -> _Entry:
        """Message `i` chained after `parent`; `context` is what the model had seen before it."""
        bodies = self._bodies(message, old)
        built: list[Section] = []
        for body in bodies:
            parent = chain(
                body, kind="history", index=first_index + len(built), stability="session", parent=parent, message_index=i
            )
            built.append(parent)
        after = context
        if isinstance(message, UserMessage) and message.context_blocks:
            after = dict(context)
            for block in message.context_blocks:
                block.apply_to(after)
        return _Entry(message=message, bodies=bodies, sections=tuple(built), context_after=after)

    def _history(self, messages: Sequence[Message], parent: Section) -> tuple[list[Section], dict[str, str]]:
        old_entries = self._cache.entries
        entries: list[_Entry] = []
        sections: list[Section] = []
        context: dict[str, str] = {}
        for i, message in enumerate(messages):
            entry = old_entries[i] if i < len(old_entries) else None
            if entry is None or entry.message is not message or entry.sections[0].parent_hash != parent.hash:
                entry = self._entry(i, message, entry, parent, len(sections), context)
            entries.append(entry)
            sections.extend(entry.sections)
            parent = entry.sections[-1]
            context = entry.context_after
        self._cache.entries = entries
        return sections, context

    # -- epochs -----------------------------------------------------------------------------------

    def _epoch(self, model: str, head: _Head, reason: str | None, effort: str | None = None) -> tuple[Epoch, bool]:
        changes: list[str] = []
        parts: list[str] = []
        if self._last is not None:
            last_model, last_head, last_effort = self._last
            changes, parts = head_changes(
                last_model,
                model,
                (last_head.sections[0].data, last_head.system, last_head.docs),
                (head.sections[0].data, head.system, head.docs),
                chained=False,
                describe=lambda part: _describe_tool_change(last_head.tools, head.tools) if part == "tools" else "",
                before_effort=last_effort,
                after_effort=effort,
            )
            if not changes:
                self._last = (model, head, effort)
                return self._epochs[-1], False
        described = "; ".join(parts) if parts else "session start"
        epoch = Epoch(
            number=len(self._epochs),
            # Why a change happened says nothing about the first epoch: nothing changed yet.
            reason=f"{reason}: {described}" if reason and parts else described,
            changes=tuple(changes),
            model=model,
            head_hash=head.sections[2].hash,
        )
        self._epochs.append(epoch)
        self._last = (model, head, effort)
        return epoch, True

    # -- the request ------------------------------------------------------------------------------

    def project(
        self,
        *,
        model: str,
        tools: Sequence[ToolSpec],
        system: SystemPrompt | str,
        transcript: Transcript,
        docs: Sequence[ProjectDoc] | str = (),
        context: Mapping[str, str] | None = None,
        rules: CacheRules | None = None,
        epoch_reason: str | None = None,
        effort: str | None = None,
    ) -> Prompt:
        """The next request. `context` is the full current dynamic context; only its changes since the
        last sent context go into the tail. `rules` overrides the projector's rules for this call
        (e.g. after a model switch). `epoch_reason` annotates the epoch this call may start. `effort`
        (the reasoning effort the call asks for) starts an epoch when it changes, as a model does."""
        check_request(model, transcript)
        rules = rules or self.rules
        head = self._head(tools, self._system_text(system), self._docs_text(docs))
        messages = transcript.messages
        history, sent = self._history(messages, head.sections[2])
        sections: list[Section] = [*head.sections, *history]

        tail: ContextBlock | None = None
        if context is not None:
            try:
                tail = context_delta(sent, context)
            except (TypeError, ValueError) as exc:
                raise ProjectionError(str(exc)) from exc
        if tail is not None:
            if not messages or not isinstance(messages[-1], UserMessage):
                raise ProjectionError("dynamic context can only be appended to a newest user message")
            last = messages[-1]
            body = context_body(tail, len(last.content), self._count)
            sections.append(
                chain(body, kind="tail", index=0, stability="turn", parent=sections[-1], message_index=len(messages) - 1)
            )
            with_tail = UserMessage.model_construct(role="user", content=last.content + (tail,))
            messages = messages[:-1] + (with_tail,)

        epoch, started = self._epoch(model, head, epoch_reason, effort)
        plan = plan_breakpoints(sections, messages, rules)
        return Prompt.model_construct(
            sections=tuple(sections),
            breakpoints=plan.breakpoints,
            tools=head.tools,
            system=head.system,
            docs=head.docs,
            messages=messages,
            tail=tail,
            context=dict(context) if context is not None else dict(sent),
            model=model,
            family=rules.family,
            prompt_cache_key=self._cache_key(sections) if rules.uses_prompt_cache_key else None,
            epoch=epoch,
            epoch_started=started,
            notes=plan.notes,
        )

    def _cache_key(self, sections: Sequence[Section]) -> str:
        # One key for the whole session, so OpenAI routes every request of it to the same cache.
        # Without a session id, the first history section (the opening user turn) identifies it.
        seed = self.session_id if self.session_id is not None else (sections[3].hash if len(sections) > 3 else sections[2].hash)
        return "hitrate-" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:32]


def check_request(model: Any, transcript: Any) -> None:
    """Raise `ProjectionError` unless `model` is a non-empty string and `transcript` a `Transcript`:
    the checks every layout that builds a request from these arguments makes first."""
    if not isinstance(model, str) or not model:
        raise ProjectionError("model must be a non-empty string")
    if not isinstance(transcript, Transcript):
        raise ProjectionError(f"transcript must be a Transcript, not {type(transcript).__name__}")


def canonical_json_or_repr(value: Any) -> str:
    """A stable cache key for template variables (repr for values JSON cannot express)."""
    try:
        return canonical_json(value)
    except TypeError:
        return repr(sorted(value.items())) if isinstance(value, dict) else repr(value)


def project(
    *,
    rules: CacheRules,
    model: str,
    tools: Sequence[ToolSpec],
    system: SystemPrompt | str,
    transcript: Transcript,
    docs: Sequence[ProjectDoc] | str = (),
    context: Mapping[str, str] | None = None,
    session_id: str | None = None,
    token_counter: TokenCounter = estimate_tokens,
) -> Prompt:
    """One request, built from scratch (no caches, first epoch)."""
    projector = Projector(rules, session_id=session_id, token_counter=token_counter)
    return projector.project(model=model, tools=tools, system=system, transcript=transcript, docs=docs, context=context)
