"""The `AgentLink` the app uses for real: a harness `Session` driven by the harness `Agent`.

Besides passing calls through, it does three things the TUI needs that a one-shot `hitrate run`
does not:

- it keeps each session's transcript as JSON next to the ledger (`transcripts/<session id>.json`),
  so `/resume` can continue a conversation: the ledger has every call, not the messages;
- it closes a turn that was cancelled or failed with a short assistant note, so the next prompt
  can follow (roles must alternate, and the interrupted turn may end on a user message);
- it wires the approval hook into the session's tool context;
- it does all of it on one thread of its own: the ledger's SQLite connection may only be used by
  the thread that opened it, while the app runs each turn in a fresh thread worker.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from pydantic import BaseModel, ConfigDict

from hitrate.harness.agent import Agent, AgentLimits, AgentResult
from hitrate.harness.router import Route, Router
from hitrate.harness.session import Session, SessionConfig, SessionInputs
from hitrate.projection.project import Projector
from hitrate.projection.transcript import AssistantMessage, TextBlock, Transcript, UserMessage
from hitrate.store.ledger import Ledger
from hitrate.store.prices import PriceTable
from hitrate.tui.bridge import EventBridge
from hitrate.tui.messages import TurnEnded
from hitrate.tui.link import Approve, Post, ReplayItem, ResumedSession, SessionInfo, figure_from_record

#: The assistant turn that closes a step the user cancelled, that failed, or that a limit stopped.
INTERRUPTED_NOTE = "[interrupted by the user]"
FAILED_NOTE = "[the previous step failed before the model answered]"


def _closing_note(result: "AgentResult | None", cancelled: bool) -> str:
    if result is None:
        return INTERRUPTED_NOTE if cancelled else FAILED_NOTE
    if result.status == "cancelled":
        return INTERRUPTED_NOTE
    if result.status.startswith("max_"):
        return f"[stopped by a limit: {result.detail}]"
    return FAILED_NOTE


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class SavedTranscript(BaseModel):
    """The file `/resume` reads."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    model: str
    """The model spec label the session last used."""
    workspace: str
    resumed_from: str | None = None
    """The session this one continues (its calls are shown with this one's)."""
    transcript: Transcript


def replay_items(transcript: Transcript) -> list[ReplayItem]:
    """The transcript as the conversation view shows it: prompts, replies, tool panels."""
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
                items.append(ReplayItem(kind="user", text=text))
            continue
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        if text:
            items.append(ReplayItem(kind="assistant", text=text))
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
                    tool=call.name,
                    args=args if isinstance(args, dict) else {"arguments": args},
                    text=content,
                    is_error=is_error,
                )
            )
    return items


class HarnessLink:
    """One interactive sitting: a session at a time (a new one on /clear or /resume)."""

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
        transcripts_dir: Path | None = None,
    ) -> None:
        """Resolve `spec` and open a session; raises ValueError (ModelSpecError, RouteError) when
        the backend cannot be used. `ledger_path` None: $HITRATE_DB or the user data dir."""
        self.workspace = Path(workspace).resolve()
        self.router = router or Router()
        self.limits = limits or AgentLimits()
        self.session_config = session_config or SessionConfig(label="tui")
        self.inputs = inputs
        self.context = context
        self.price_table = price_table
        self.clock = clock
        self._forward: Callable[[BaseModel], None] | None = None
        self._resumed_from: str | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hitrate-agent")
        try:
            self.ledger: Ledger = self._here(Ledger, ledger_path)
            self.transcripts_dir = transcripts_dir or self.ledger.path.parent / "transcripts"
            self.session: Session = self._here(lambda: self._open(self.router.resolve(spec)))
        except BaseException:
            self._shutdown()
            raise

    def _here(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn` on the link's own thread and wait for it (exceptions come back as raised)."""
        return self._thread.submit(fn, *args).result()

    def _shutdown(self) -> None:
        ledger = getattr(self, "ledger", None)
        if ledger is not None:
            self._thread.submit(ledger.close).result()
        self._thread.shutdown(wait=True)

    # ---- session plumbing ------------------------------------------------------------------

    def _sink(self, event: BaseModel) -> None:
        forward = self._forward
        if forward is not None:
            forward(event)

    def _open(self, route: Route, config: SessionConfig | None = None) -> Session:
        return Session(
            route,
            self.workspace,
            ledger=self.ledger,
            inputs=self.inputs,
            config=config or self.session_config,
            sink=self._sink,
            context=self.context,
            price_table=self.price_table,
        )

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
        self._here(self._run_turn, prompt, post, cancel, approve)

    def _run_turn(self, prompt: str, post: Post, cancel: threading.Event, approve: Approve) -> None:
        session = self.session
        bridge = EventBridge(post, backend=self.provider, model=self.model, clock=self.clock)
        session.tool_context = dataclasses.replace(session.tool_context, approve=approve)
        self._forward = bridge
        result: AgentResult | None = None
        try:
            result = Agent(session, limits=self.limits, cancel=cancel).run(prompt)
        finally:
            self._forward = None
            self._close_open_turn(session, _closing_note(result, cancel.is_set()))
            self.save_transcript()
        if bridge.outcome is None:  # the agent always ends with Finished; say so if it did not
            post(TurnEnded("cancelled" if result.status == "cancelled" else "failed", result.detail))

    @staticmethod
    def _close_open_turn(session: Session, note: str) -> None:
        """A turn that stopped before the model answered (cancelled, failed, or a limit hit after
        tools ran) leaves a user message last, and the next prompt would be a second user message
        in a row. Close it with a note the model will read, appended after everything already
        sent (append-only: no earlier byte changes)."""
        messages = session.transcript.messages
        if messages and isinstance(messages[-1], UserMessage):
            session.transcript = session.transcript.append(AssistantMessage(content=(TextBlock(text=note),)))

    # ---- transcripts -----------------------------------------------------------------------

    def _transcript_path(self, session_id: str) -> Path:
        if not session_id or any(c not in "0123456789abcdefABCDEF-" for c in session_id):
            raise KeyError(f"{session_id!r} is not a session id (ids are hex digits; /resume lists them)")
        return self.transcripts_dir / f"{session_id}.json"

    def save_transcript(self) -> None:
        session = self.session
        if not session.transcript.messages:
            return
        saved = SavedTranscript(
            session_id=session.id,
            model=session.route.label,
            workspace=str(self.workspace),
            resumed_from=self._resumed_from,
            transcript=session.transcript,
        )
        path = self._transcript_path(session.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(saved.model_dump_json(), encoding="utf-8")
        tmp.replace(path)  # atomic: a crash mid-write never leaves half a transcript

    def _load(self, session_id: str) -> SavedTranscript:
        path = self._transcript_path(session_id)
        if not path.is_file():
            raise KeyError(f"no saved transcript for session {session_id} (only TUI sessions can be resumed; /resume lists them)")
        try:
            return SavedTranscript.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"the transcript of session {session_id} ({path}) cannot be read: {exc}") from exc

    # ---- commands (event loop, between turns) ------------------------------------------------

    def check_model(self, spec: str) -> tuple[str, str, str]:
        parsed = self.router.parse(spec)
        return parsed.provider, parsed.model, parsed.label

    def switch_model(self, spec: str) -> None:
        self._here(lambda: self.session.switch_model(self.router.resolve(spec)))

    def new_session(self) -> None:
        self._here(self._new_session)

    def _new_session(self) -> None:
        self.save_transcript()
        self._resumed_from = None
        self.session = self._open(self.session.route)

    def recent_sessions(self, limit: int = 10) -> list[SessionInfo]:
        return self._here(self._recent_sessions, limit)

    def _recent_sessions(self, limit: int) -> list[SessionInfo]:
        if not self.transcripts_dir.is_dir():
            return []
        found: list[SessionInfo] = []
        for record in reversed(self.ledger.sessions()):
            path = self.transcripts_dir / f"{record.id}.json"
            if record.id == self.session.id or not path.is_file():
                continue
            try:
                saved = self._load(record.id)
            except (KeyError, ValueError):
                continue
            totals = self.ledger.totals(session_id=record.id)
            first = next((i.text for i in replay_items(saved.transcript) if i.kind == "user"), "")
            found.append(
                SessionInfo(
                    id=record.id,
                    started_at=record.started_at,
                    model=saved.model,
                    calls=totals.calls,
                    cost_usd=totals.cost_usd,
                    first_prompt=first,
                )
            )
            if len(found) >= limit:
                break
        return found

    def resume(self, session_id: str) -> ResumedSession:
        return self._here(self._resume, session_id)

    def _resume(self, session_id: str) -> ResumedSession:
        saved = self._load(session_id)
        chain = self._session_chain(saved)
        self.save_transcript()
        # The ledger cannot reopen a session id, so the continuation is a new session whose label
        # names the one it continues; the OpenAI routing key stays the old session's, so requests
        # keep landing where that prefix is cached.
        config = self.session_config.model_copy(update={"label": f"tui resume of {session_id}"})
        session = self._open(self.session.route, config)
        session.projector = Projector(session.route.rules, session_id=chain[0])
        session.transcript = saved.transcript
        self.session = session
        self._resumed_from = session_id
        records = [r for sid in chain for r in self.ledger.calls(session_id=sid)]
        figures = [figure_from_record(r, n) for n, r in enumerate(records, start=1)]
        return ResumedSession(session_id=session_id, items=replay_items(saved.transcript), calls=figures)

    def _session_chain(self, saved: SavedTranscript) -> list[str]:
        """The ids of the sessions a resumed session continues, oldest first, then its own."""
        chain = [saved.session_id]
        current = saved
        while current.resumed_from and current.resumed_from not in chain:
            try:
                current = self._load(current.resumed_from)
            except (KeyError, ValueError):
                break
            chain.insert(0, current.session_id)
        return chain

    def close(self) -> None:
        """Save the transcript, release the backend (a local engine stops), close the ledger."""
        try:
            self._here(self.save_transcript)
            self._here(self.session.close)
        finally:
            self._shutdown()
