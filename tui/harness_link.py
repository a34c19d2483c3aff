"""The `AgentLink` the app uses for real: a harness `Session` driven by the harness `Agent`.

The harness does the work: the ledger may be used from the app's threads, the session stores its
transcript in the ledger as it goes (so `/resume` and `--resume` continue a session from there),
closes a turn that stopped early, and asks the approval hook before a tool changes anything. The
link only turns the session's events into the app's messages and session facts into plain data.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hitrate.harness.agent import Agent, AgentLimits, AgentResult
from hitrate.harness.interruptible import Cancelled
from hitrate.harness.idle_compaction import idle_compaction_decision
from hitrate.harness.keepalive import CacheWarmer, KeepAliveConfig, KeepAliveDecision
from hitrate.harness.resume import SessionNotResumable, load_session, resumable_sessions
from hitrate.harness.route_clients import openai_auth_for
from hitrate.harness.router import Route, Router
from hitrate.harness.session import Session, SessionConfig, SessionInputs
from hitrate.harness.terminal_text import visible, visible_value
from hitrate.harness.wire.types import CallError
from hitrate.projection.transcript import TextBlock, Transcript, UserMessage
from hitrate.store.ledger import Ledger
from hitrate.store.prices import PriceTable
from hitrate.store.records import utc_now
from hitrate.tui.bridge import EventBridge
from hitrate.tui.link import Approve, Post, ReplayItem, ResumedSession, SessionInfo, figure_from_record
from hitrate.tui.messages import TurnEnded

_SESSION_ID_CHARS = frozenset("0123456789abcdefABCDEF-")


def replay_items(transcript: Transcript) -> list[ReplayItem]:
    """The transcript as the conversation view shows it: prompts, replies, tool panels; every
    string with its terminal control characters shown (`terminal_text`), as the live view has it."""
    items: list[ReplayItem] = []
    results: dict[str, tuple[str, bool]] = {}
    for message in transcript.messages:
        if isinstance(message, UserMessage):
            for result in message.tool_results:
                results[result.call_id] = (result.content, result.is_error)
    for message in transcript.messages:
        if isinstance(message, UserMessage):
            text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
            if text:
                items.append(ReplayItem(kind="user", text=visible(text)))
            continue
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        if text:
            items.append(ReplayItem(kind="assistant", text=visible(text)))
        for call in message.tool_calls:
            try:
                args = call.parsed_arguments()
            except ValueError:
                args = {"arguments (not JSON)": call.arguments}
            content, is_error = results.get(call.call_id, ("(no result recorded)", True))
            items.append(
                ReplayItem(
                    kind="tool",
                    call_id=call.call_id,
                    tool=visible(call.name),
                    args=visible_value(args if isinstance(args, dict) else {"arguments": args}),  # type: ignore[arg-type]
                    text=visible(content),
                    is_error=is_error,
                )
            )
    return items


class HarnessLink:
    """One interactive sitting: a session at a time (a new one on /clear, another on /resume)."""

    def __init__(
        self,
        spec: str,
        workspace: str | Path,
        ledger_path: str | Path | None = None,
        *,
        router: Router | None = None,
        limits: AgentLimits | None = None,
        session_config: SessionConfig | None = None,
        inputs: SessionInputs | None = None,
        context: Callable[[], dict[str, str]] | None = None,
        price_table: PriceTable | None = None,
        clock: Callable[[], datetime] = utc_now,
        keepalive: KeepAliveConfig | None = None,
    ) -> None:
        """Resolve `spec` and open a session; raises ValueError (ModelSpecError, RouteError) when
        the backend cannot be used. `ledger_path` None: $HITRATE_DB or the user data dir.
        `clock` stamps each call's start (the TTL countdown runs from it). `keepalive` configures
        the warm-ups that keep an idle session's cached prefix alive when that pays."""
        self.workspace = Path(workspace).resolve()
        self.router = router or Router()
        self.limits = limits or AgentLimits()
        self.session_config = session_config or SessionConfig(label="tui")
        self.inputs = inputs
        self.context = context
        self.price_table = price_table
        self.clock = clock
        self.warmer = CacheWarmer(keepalive)
        # A turn and a warm-up both extend the session's ledger rows and move its last request:
        # never both at once. A turn stops a warm-up in flight (`_warm_cancel`) and waits for it.
        self._work = threading.Lock()
        self._warm_cancel = threading.Event()
        self._forward: Callable[[BaseModel], None] | None = None
        self.ledger = Ledger(ledger_path)
        try:
            route = self.router.resolve(spec)
            try:
                self.session = Session(route, self.workspace, ledger=self.ledger, config=self.session_config, **self._session_kwargs())
            except BaseException:
                route.close()
                raise
        except BaseException:
            self.ledger.close()
            raise

    def _session_kwargs(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "sink": self._sink, "context": self.context, "price_table": self.price_table,
                "clock": self.clock}

    def _sink(self, event: BaseModel) -> None:
        forward = self._forward
        if forward is not None:
            forward(event)

    @property
    def provider(self) -> str:
        return self.session.route.spec.provider

    @property
    def model(self) -> str:
        return self.session.route.model

    @property
    def model_label(self) -> str:
        return self.session.route.label

    @property
    def session_id(self) -> str:
        return self.session.id

    # ---- a turn (worker thread) -------------------------------------------------------------

    def run_turn(self, prompt: str, post: Post, cancel: threading.Event, approve: Approve) -> None:
        self._warm_cancel.set()
        with self._work:
            self._run_turn(prompt, post, cancel, approve)

    def _run_turn(self, prompt: str, post: Post, cancel: threading.Event, approve: Approve) -> None:
        session = self.session
        bridge = EventBridge(post, backend=self.provider, model=self.model)
        session.approve = approve
        self._forward = bridge
        result: AgentResult | None = None
        try:
            result = Agent(session, limits=self.limits, cancel=cancel).run(prompt)
        finally:
            self._forward = None
        if bridge.outcome is None:  # the agent always ends with Finished; say so if it did not
            post(TurnEnded("cancelled" if result.status == "cancelled" else "failed", result.detail))

    # ---- keep-alive --------------------------------------------------------------------------

    def keepalive(self, now: datetime) -> KeepAliveDecision:
        return self.warmer.decision(self.session, now)

    @property
    def keepalive_enabled(self) -> bool:
        return self.warmer.enabled

    def set_keepalive(self, on: bool) -> None:
        self.warmer.enabled = on

    def context_window(self) -> tuple[int | None, float]:
        session = self.session
        return session.context_window(), session.config.compact_at

    def idle_compaction_due(self, now: datetime) -> bool:
        """Whether the idle session should compact now, before its cached prefix expires."""
        decision = idle_compaction_decision(self.session, now, self.keepalive(now), self.warmer.config)
        return decision is not None and decision.compact

    def warm_up(self, post: Post) -> None:
        """(worker thread) Send a warm-up if one is still due once the session is free. A failed or
        stopped warm-up is recorded and reported like any call, not raised."""
        cancel = threading.Event()
        self._warm_cancel = cancel
        with self._work:
            session = self.session
            now = self.clock()
            decision = self.warmer.decision(session, now)
            idle = idle_compaction_decision(session, now, decision, self.warmer.config)
            compact = idle is not None and idle.compact
            if cancel.is_set() or (decision.action != "warm" and not compact):
                return  # a turn or a command came first; the prefix it sent needs no warm-up now
            self._forward = EventBridge(post, backend=self.provider, model=self.model)
            try:
                if compact:
                    # Cheaper than a warm-up: the summary reads the warm prefix, and the user's
                    # return writes only the compacted prompt (harness.idle_compaction).
                    session.compact(cancel)
                else:
                    self.warmer.warm(session, cancel)
            except (CallError, Cancelled):
                pass
            finally:
                self._forward = None

    def refresh_head(self) -> list[str]:
        """Read AGENTS.md, the system template and the tools again for the next requests; what
        changed (a change starts a new epoch)."""
        with self._session_free():
            return self.session.refresh_head()

    def compact(self, post: Post) -> str:
        """(worker thread) Summarize the history now; the summary call arrives as CallRecorded."""
        with self._session_free():
            session = self.session
            before = len(session.transcript.messages)
            self._forward = EventBridge(post, backend=self.provider, model=self.model)
            try:
                record = session.compact(threading.Event())
            finally:
                self._forward = None
            if record is None:
                return "nothing to compact yet: the history is only the newest turn"
            usage = record.usage
            read = f"{usage.cache_read:,} of {usage.prompt_tokens:,}" if usage.cache_read is not None and usage.prompt_tokens else "?"
            kept = len(session.transcript.messages) - 1
            return (f"compacted: {before - kept} earlier messages are now a summary, {kept} recent ones kept as they were; "
                    f"the summary call read {read} prompt tokens from the cache")

    def _session_free(self) -> threading.Lock:
        """The work lock, after asking a warm-up in flight to stop."""
        self._warm_cancel.set()
        return self._work

    # ---- commands (event loop, between turns) ------------------------------------------------

    def check_model(self, spec: str) -> tuple[str, str, str]:
        """(provider, model, label) of `spec`; ValueError when it is malformed or its credentials
        are missing, so nobody is asked to confirm the cost of a switch that cannot happen."""
        parsed = self.router.parse(spec)
        parsed.api_key(self.router.env)  # raises ModelSpecError naming the variable to set
        if parsed.provider == "azure":
            openai_auth_for(parsed, self.router.env)
        return parsed.provider, parsed.model, parsed.label

    def switch_model(self, spec: str) -> None:
        route = self.router.resolve(spec)
        with self._session_free():
            self.session.switch_model(route)

    @property
    def effort(self) -> str | None:
        return self.session.effort

    def set_effort(self, effort: str | None) -> None:
        with self._session_free():
            self.session.set_effort(effort)  # type: ignore[arg-type]
        # A new or resumed session asks for it too.
        self.session_config = self.session_config.model_copy(update={"effort": effort})

    def new_session(self) -> None:
        with self._session_free():
            self.session = self._open_new(self.session.route)

    def _open_new(self, route: Route) -> Session:
        return Session(route, self.workspace, ledger=self.ledger, config=self.session_config, **self._session_kwargs())

    def recent_sessions(self, limit: int = 10) -> list[SessionInfo]:
        found = resumable_sessions(self.ledger, limit=limit, exclude=[self.session.id])
        return [
            SessionInfo(id=s.id, started_at=s.started_at, model=s.model_spec, calls=s.calls, cost_usd=s.cost_usd,
                        first_prompt=s.first_prompt)
            for s in found
        ]

    def resume(self, session_id: str, *, keep_model: bool = False, keep_workspace: bool = False) -> ResumedSession:
        """Continue `session_id` from the ledger where it left off: on the model it last used (its
        cache entries are that model's) and in its workspace (its files), unless told to keep the
        current ones (`hitrate tui --resume` with an explicit --model / --workspace). When the model
        cannot be used now (no key, no server) or the folder is gone, the current one is kept and a
        note says so."""
        if not session_id or any(c not in _SESSION_ID_CHARS for c in session_id):
            raise KeyError(f"{session_id!r} is not a session id (ids are hex digits; /resume lists them)")
        notes: list[str] = []
        try:
            stored = load_session(self.ledger, session_id)
        except SessionNotResumable:
            raise
        spec = stored.stored.model_spec or stored.record.model_spec
        route = self.session.route
        new_route: Route | None = None
        if spec and spec != route.label and not keep_model:
            try:
                new_route = self.router.resolve(spec)
                route = new_route
            except ValueError as exc:
                notes.append(f"its model {spec} cannot be used now ({exc}); resumed on {route.label}")
        workspace = self.workspace
        recorded = stored.record.workspace
        if recorded and Path(recorded).resolve() != self.workspace and not keep_workspace:
            if Path(recorded).is_dir():
                workspace = Path(recorded).resolve()
            else:
                notes.append(f"its workspace {recorded} is gone; resumed in {self.workspace}")
        try:
            with self._session_free():
                session = Session.resume(self.ledger, session_id, route, workspace,
                                         config=self.session_config, **self._session_kwargs())
                old = self.session
                self.session = session
        except BaseException:
            if new_route is not None:
                new_route.close()
            raise
        if old.route is not session.route:
            old.route.close()
        self.workspace = workspace
        if session.head_notice is not None:
            notes.append(session.head_notice)
        figures = [
            figure_from_record(record, n, epoch=session.epoch_of_call.get(record.id, 0))
            for n, (_, record) in enumerate(session.records, start=1)
        ]
        return ResumedSession(session_id=session_id, items=replay_items(session.transcript), calls=figures,
                              workspace=str(workspace), notes=notes)

    def close(self) -> None:
        """Release the backend (a local engine stops) and close the ledger."""
        # A warm-up in flight stops at once and records itself; give it a moment to do so.
        self._warm_cancel.set()
        if self._work.acquire(timeout=5):
            self._work.release()
        try:
            self.session.close()
        finally:
            self.ledger.close()
