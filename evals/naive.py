"""The naive layout: the same content assembled the way common harnesses assemble it.

Common agent harnesses render the environment into the system prompt (current date and time,
working directory, git status, the budget left), send the tools in the order they were
registered, and place no cache marks and no routing key. `NaiveAssembler` builds that request as
the same wire-neutral `Prompt` the adapters render, from the same inputs the cache-aware
`Projector` gets, so an eval A/B between the two differs only in assembly:

- tools: registration order (`NAIVE_TOOL_ORDER`), not sorted by name;
- system: the template text, then an environment block holding every dynamic-context value plus
  the time to the second: it changes on every request, and with it every byte after it;
- docs and messages: the same bytes as the cache-aware layout (no dynamic-context tail: the
  context already went into the system prompt);
- no breakpoints, no `prompt_cache_key`.

It has the `project(...)` signature of `projection.Projector`, so a `Session` uses it when it is
set as the session's `projector` (see `use_naive_layout`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone

from hitrate.harness.session import Session
from hitrate.projection.caching import CacheRules
from hitrate.projection.epochs import head_changes
from hitrate.projection.canonical import TokenCounter, canonical_json, chain_hash, estimate_tokens
from hitrate.projection.docs import ProjectDoc, render_docs
from hitrate.projection.project import SystemPrompt, check_request
from hitrate.projection.prompt import Epoch, Prompt, Section
from hitrate.projection.sections import chain, message_bodies, text_body, tools_body
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import Transcript

# The order a typical harness registers its tools in: file tools first, then search, then the shell.
NAIVE_TOOL_ORDER: tuple[str, ...] = ("read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "shell")

# How the dynamic-context keys the harness provides are titled in the environment block.
_ENV_TITLES = {"date": None, "workspace": "Working directory", "git": "Git status", "budget left": "Budget left"}

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def registration_order(tools: Sequence[ToolSpec], order: Sequence[str] = NAIVE_TOOL_ORDER) -> list[ToolSpec]:
    """Tools in registration order: the names in `order` first, then any others as given."""
    rank = {name: i for i, name in enumerate(order)}
    indexed = list(enumerate(tools))
    indexed.sort(key=lambda pair: (rank.get(pair[1].name, len(rank)), pair[0]))
    return [tool for _, tool in indexed]


def environment_block(context: Mapping[str, str], now: datetime) -> str:
    """The environment section a naive harness appends to its system prompt."""
    lines = ["# Environment", f"Current date and time: {now.astimezone(timezone.utc).strftime('%Y-%m-%d %H:%M:%S')} UTC"]
    for key in sorted(context):
        title = _ENV_TITLES.get(key, key.capitalize())
        if title is None:
            continue  # the date is already in the timestamp line
        lines.append(f"{title}: {context[key]}")
    return "\n".join(lines)


class NaiveAssembler:
    """Builds each request of a session in the naive layout (see the module docstring)."""

    def __init__(
        self,
        rules: CacheRules,
        *,
        session_id: str | None = None,
        clock: Clock = _utc_now,
        tool_order: Sequence[str] = NAIVE_TOOL_ORDER,
        token_counter: TokenCounter = estimate_tokens,
    ) -> None:
        self.rules = rules
        self.session_id = session_id
        self.clock = clock
        self.tool_order = tuple(tool_order)
        self._count = token_counter
        self._epochs: list[Epoch] = []
        self._identity: str | None = None
        self._last: tuple[str, tuple[str, str, str], str | None] | None = None

    @property
    def epochs(self) -> tuple[Epoch, ...]:
        return tuple(self._epochs)

    def _epoch(
        self, model: str, tools: Sequence[ToolSpec], template: str, docs: str, reason: str | None, effort: str | None
    ) -> tuple[Epoch, bool]:
        # An epoch is a stretch with one model, tool set, system template and docs. The environment
        # block is left out on purpose: it changes on every request, which is the layout's point,
        # not a change of configuration.
        dumped = [t.model_dump(mode="json") for t in tools]
        identity = chain_hash("0" * 64, canonical_json([model, dumped, template, docs, effort]).encode("utf-8"))
        head = (canonical_json(dumped), template, docs)
        if self._identity == identity and self._epochs:
            return self._epochs[-1], False
        changes, parts = (
            head_changes(self._last[0], model, self._last[1], head, chained=False, before_effort=self._last[2], after_effort=effort)
            if self._last
            else ([], [])
        )
        described = "; ".join(parts) if parts else "session start"
        epoch = Epoch(
            number=len(self._epochs),
            reason=f"{reason}: {described}" if reason else described,
            changes=tuple(changes),
            model=model,
            head_hash=identity,
        )
        self._epochs.append(epoch)
        self._identity = identity
        self._last = (model, head, effort)
        return epoch, True

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
        """The next request in the naive layout; same arguments as `Projector.project`."""
        check_request(model, transcript)
        rules = rules or self.rules
        template = system if isinstance(system, str) else system.render()
        docs_text = docs if isinstance(docs, str) else render_docs(tuple(docs))
        ordered = registration_order(tools, self.tool_order)
        env = environment_block(dict(context or {}), self.clock())
        system_text = f"{template}\n\n{env}" if template else env

        s_tools = chain(tools_body(ordered, self._count), kind="tools", index=0, stability="static", parent=None)
        # Volatile data in the system section: it is honestly labelled "turn", it changes per request.
        s_system = chain(text_body(system_text, self._count), kind="system", index=0, stability="turn", parent=s_tools)
        s_docs = chain(text_body(docs_text, self._count), kind="docs", index=0, stability="turn", parent=s_system)
        sections: list[Section] = [s_tools, s_system, s_docs]
        parent = s_docs
        for i, message in enumerate(transcript.messages):
            for body in message_bodies(message, self._count):
                parent = chain(body, kind="history", index=len(sections) - 3, stability="turn", parent=parent, message_index=i)
                sections.append(parent)

        epoch, started = self._epoch(model, ordered, template, docs_text, epoch_reason, effort)
        return Prompt.model_construct(
            sections=tuple(sections),
            breakpoints=(),
            tools=tuple(ordered),
            system=system_text,
            docs=docs_text,
            messages=transcript.messages,
            tail=None,
            context=dict(context or {}),
            model=model,
            family=rules.family,
            prompt_cache_key=None,
            epoch=epoch,
            epoch_started=started,
            notes=(),
        )


def use_naive_layout(session: Session, *, clock: Clock = _utc_now) -> NaiveAssembler:
    """Make `session` assemble its requests in the naive layout from its next call on.

    A session calls `self.projector.project(...)` for every request; the assembler has that
    method, so swapping the attribute is the whole hook."""
    assembler = NaiveAssembler(session.route.rules, session_id=session.id, clock=clock)
    session.projector = assembler  # type: ignore[assignment]
    return assembler
