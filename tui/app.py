"""The hitrate Textual app: a conversation with the agent beside a live view of the prompt cache.

The agent runs in a thread worker (`_agent_turn`) and only posts messages (`hitrate.tui.messages`);
the `on_*` handlers below are the only code that changes widgets. Slash commands run on the event
loop between turns (`hitrate.tui.app_commands`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer

from hitrate.harness.checkpoints import CheckpointError, Checkpoints
from hitrate.harness.harness_turns import ENDED
from hitrate.harness.permissions import GUARDED_TOOLS, PermissionRuleError, Permissions
from hitrate.harness.terminal_text import visible
from hitrate.store.records import utc_now
from hitrate.tools import UNCONFINED_SHELL, Refusal, confinement_notice
from hitrate.tui.activity import Activity, host_of
from hitrate.tui.app_commands import CommandsMixin
from hitrate.tui.cache_panel import NARROW, CachePanel, summary_text
from hitrate.tui.context_gauge import context_used
from hitrate.tui.conversation import Conversation
from hitrate.tui.dialogs import ApprovalAnswer, ApprovalScreen, ConfirmScreen
from hitrate.tui.figures import SessionFigures, one_line
from hitrate.tui.keepalive_view import panel_line, status_segment
from hitrate.tui.link import AgentLink, ResumedSession
from hitrate.tui.mentions import expand_mentions, mentioned_paths
from hitrate.tui.messages import (
    ApprovalRequested,
    CallRecorded,
    CallStarting,
    EpochStarted,
    HarnessTurnAdded,
    KeepAliveEnded,
    Notice,
    StreamVoided,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
)
from hitrate.tui.prompt_input import InputHistory, PromptInput
from hitrate.tui.status import StatusLine, status_segments
from hitrate.tui.tool_panel import tool_title
from hitrate.tui.ttl import PrefixClock



class HitrateApp(CommandsMixin, App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "hitrate"
    ENABLE_COMMAND_PALETTE = False
    #: Below 110 columns the cache panel takes its compact form (app.tcss, `cache_panel.NARROW`).
    HORIZONTAL_BREAKPOINTS = [(0, NARROW), (110, "-wide")]

    BINDINGS = [
        Binding("ctrl+c", "interrupt", "Cancel step", priority=True),
        Binding("escape", "cancel", "Cancel step", show=False),
        Binding("pageup", "scroll_conversation('up')", "Scroll up", show=False, priority=True),
        Binding("pagedown", "scroll_conversation('down')", "Scroll down", show=False, priority=True),
        Binding("ctrl+g", "external_editor", "Editor"),
        Binding("f1", "help", "Help"),
        Binding("f2", "show_cost", "Cost"),
        Binding("ctrl+b", "toggle_cache", "Cache panel"),
        Binding("ctrl+o", "toggle_tool_output", "Tool output", show=False),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def __init__(
        self,
        link: AgentLink,
        *,
        approvals: bool = True,
        clock: Callable[[], datetime] = utc_now,
        tick_s: float | None = 1.0,
        workspace: Path | None = None,
        history: InputHistory | None = None,
        resumed: ResumedSession | None = None,
        permissions: Permissions | None = None,
        checkpoints: Checkpoints | None = None,
    ) -> None:
        """`clock` and `tick_s` exist so tests can freeze the TTL countdown (tick_s=None: no timer;
        `tick()` then does what the timer would, keep-alive warm-ups included). `permissions`: the
        allow / deny rules (`hitrate.harness.permissions`); None: none, every change is asked about.
        `checkpoints`: snapshots of the workspace around each turn, for /undo (None: no /undo)."""
        super().__init__()
        self.link = link
        self.approvals = approvals
        self.permissions = permissions or Permissions()
        self.checkpoints = checkpoints
        self.pending_notes: list[str] = []
        """Said to the model with the next prompt, appended after it (an undo, an added file): a
        new user block at the end, never a rewrite of what was already sent."""
        self.clock = clock
        self.tick_s = tick_s
        self.workspace = workspace
        self.figures = SessionFigures()
        self.prefix_clock = PrefixClock(link.provider, link.model)
        self.activity = Activity(what="ready")
        self.busy = False
        """True while a turn runs or a /model switch resolves its backend: no new prompt then."""
        self._turn_running = False
        self.warming = False
        """True while a keep-alive warm-up runs (at most one at a time)."""
        self.keepalive_toggled = False
        """The user switched keep-alive in this sitting: its state stays on screen."""
        self._cancel = threading.Event()
        self._history = history or InputHistory()
        self._resumed = resumed
        self._queued: list[str] = []
        """Prompts typed while the agent worked, sent in order as each turn ends."""

    # ---- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield Conversation(id="conversation")
            yield CachePanel(id="cache")
        yield StatusLine(id="status")
        yield PromptInput(
            history=self._history,
            placeholder="Ask the agent (@file to include one), or /help",
            workspace=self.workspace,
            id="prompt",
        )
        yield Footer()

    async def on_mount(self) -> None:
        self.refresh_figures()
        self.query_one(PromptInput).focus()
        if self.tick_s:
            self.set_interval(self.tick_s, self.tick)
        where = f" in {self.workspace.name}" if self.workspace is not None else ""
        await self.conversation.add_notice(
            f"hitrate{where} · {self.link.model_label} · /help for commands, Esc cancels a step"
        )
        unconfined = confinement_notice()
        if unconfined is not None:
            await self.conversation.add_notice(f"warning: {unconfined}")
        if self._resumed is not None:
            await self.show_resumed(self._resumed)

    @property
    def conversation(self) -> Conversation:
        return self.query_one(Conversation)

    @property
    def cache_panel(self) -> CachePanel:
        return self.query_one(CachePanel)

    def refresh_figures(self) -> None:
        """Redraw the status line and the panel summary from the figures and the clock."""
        now = self.clock()
        totals = self.figures.totals()
        clock = self.prefix_clock.clock(now)
        decision = self.link.keepalive(now)
        shown = {"busy": self.busy, "warming": self.warming, "toggled": self.keepalive_toggled}
        activity = self.activity
        if self._queued:
            activity = activity.model_copy(update={"what": f"{activity.what} · {len(self._queued)} queued"})
        segments = status_segments(self.link.model_label, activity, totals, clock, status_segment(decision, now, **shown), now)
        self.query_one(StatusLine).show(segments, clock)
        panel = self.cache_panel
        panel.show_summary(
            summary_text(self.link.model, self.link.provider, totals, len(self.figures.misses()), self.figures.miss_cost_usd(),
                         compact=self.screen.has_class(NARROW))
        )
        window, compact_at = self.link.context_window()
        panel.show_context(context_used(self.figures.calls), window, compact_at)
        panel.show_clock(clock)
        panel.show_keepalive(panel_line(decision, now, **shown))

    def on_cache_panel_resized(self) -> None:
        # Crossing the narrow breakpoint changes the panel's width and its summary's form.
        self.refresh_figures()

    def tick(self) -> None:
        """Once a second: redraw the countdowns, and start a keep-alive warm-up when one is due."""
        self.refresh_figures()
        self.maybe_warm()

    def maybe_warm(self) -> bool:
        """Start a warm-up if the warmer says one is due now and nothing else is running."""
        if self.busy or self.warming:
            return False
        now = self.clock()
        if self.link.keepalive(now).action != "warm" and not self.link.idle_compaction_due(now):
            return False
        self.warming = True
        self.refresh_figures()
        self._keepalive_worker()
        return True

    @work(thread=True, group="keepalive", exit_on_error=False)
    def _keepalive_worker(self) -> None:
        # Off the event loop like a turn; the warm-up's call arrives as CallRecorded.
        error: str | None = None
        try:
            self.link.warm_up(self.post_message)
        except Exception as exc:  # the app must survive it and say what it was
            error = f"{type(exc).__name__}: {exc}"
        self.post_message(KeepAliveEnded(error))

    def set_activity(self, what: str, *, short: str | None = None, step: int | None = None,
                     prompt_tokens: int | None = None) -> None:
        """A new state of the agent, timed from now ("ready" has no clock)."""
        since = None if what == "ready" else self.clock()
        self.activity = Activity(what=what, short=short, since=since, step=step, prompt_tokens=prompt_tokens)
        self.refresh_figures()

    # ---- input -----------------------------------------------------------------------------

    @on(PromptInput.Submitted, "#prompt")
    async def on_prompt_submitted(self, event: PromptInput.Submitted) -> None:
        text = event.value
        if not text.strip():
            return
        prompt_box = self.query_one(PromptInput)
        prompt_box.prompt_history.add(text)
        if text.lstrip().startswith("/"):
            await self.run_command_line(text)
            return
        if self.busy:
            # Typing ahead is normal: the prompt waits for the step to end, then goes out.
            self._queued.append(text)
            await self.conversation.add_notice(
                f"queued (sent when the agent stops; Ctrl-C cancels the step): {one_line(text)}"
            )
            self.refresh_figures()
            return
        await self.send_prompt(text)

    async def send_prompt(self, text: str) -> None:
        blocks: list[str] = []
        if self.workspace is not None:
            blocks, problems = expand_mentions(self.workspace, text)
            if problems:
                self.conversation.follow()
                for problem in problems:
                    await self.conversation.add_notice(f"not sent: {problem}", "error")
                box = self.query_one(PromptInput)
                if not box.value:
                    box.value = text
                return
        await self.conversation.add_user(text)
        self.conversation.follow()
        if blocks:
            await self.conversation.add_notice(f"with {len(blocks)} mentioned file(s): " + ", ".join(mentioned_paths(text)))
        notes, self.pending_notes = self.pending_notes, []
        # The prompt first, then what goes with it: all in the new user message at the end.
        self.start_turn("\n\n".join([text, *notes, *blocks]), label=text)

    @on(PromptInput.EditorFailed)
    async def on_editor_failed(self, message: PromptInput.EditorFailed) -> None:
        await self.conversation.add_notice(message.error, "error")

    def start_turn(self, prompt: str, label: str = "") -> None:
        """`label`: what the user typed (the checkpoint's name, for /undo); default the prompt."""
        self.busy = True
        self._turn_running = True
        self._cancel = threading.Event()
        self.set_activity("starting")
        self._agent_turn(prompt, self._cancel, label or prompt)

    @work(thread=True, exclusive=True, group="agent", exit_on_error=False)
    def _agent_turn(self, prompt: str, cancel: threading.Event, label: str) -> None:
        # Runs off the event loop: it may only post messages.
        before = self._checkpoint("begin")
        try:
            self.link.run_turn(prompt, self.post_message, cancel, self._approve_from_worker(cancel))
        except Exception as exc:  # the app must survive any agent failure and say what it was
            self.post_message(TurnEnded("failed", f"{type(exc).__name__}: {exc}"))
        finally:
            if before is not None:
                self._checkpoint("end", before, label)

    def _checkpoint(self, step: str, before: str | None = None, label: str = "") -> str | None:
        """(worker) Snapshot the workspace before / after a turn for /undo; a failure is reported
        once and turns checkpoints off rather than stopping the agent."""
        checkpoints = self.checkpoints
        if checkpoints is None:
            return None
        try:
            if step == "begin":
                return checkpoints.begin()
            checkpoints.end(before or "", label=label)
        except CheckpointError as exc:
            self.checkpoints = None
            self.post_message(Notice(f"checkpoints are off, /undo will not work: {exc}", "warning"))
        return None

    def move_to_workspace(self, workspace: Path) -> None:
        """Work in another folder (a resumed session's): mentions and checkpoints follow."""
        self.workspace = workspace
        self.query_one(PromptInput).workspace = workspace
        if self.checkpoints is not None:
            try:
                self.checkpoints = Checkpoints(workspace, self.checkpoints.git_dir.parent)
            except CheckpointError as exc:
                self.checkpoints = None
                self.notify(f"checkpoints are off, /undo will not work: {exc}", severity="warning")

    @on(Notice)
    async def on_notice(self, message: Notice) -> None:
        await self.conversation.add_notice(message.text, message.kind)

    def _approve_from_worker(self, cancel: threading.Event) -> Callable[[str, dict[str, Any]], bool | Refusal]:
        """The approval hook of a turn: the permission rules decide, or the user is asked."""

        def ask(tool: str, args: dict[str, Any]) -> bool | Refusal:
            reply: Future[ApprovalAnswer] = Future()
            self.post_message(ApprovalRequested(tool, args, reply))
            while True:
                try:
                    answer = reply.result(timeout=0.1)
                except FutureTimeout:
                    if cancel.is_set():
                        return False
                    continue
                return Refusal(answer.reason) if answer.choice == "deny" else True

        asking = self.permissions.hook(ask)
        # With approvals off nothing is asked, but a deny rule still refuses.
        unattended = self.permissions.hook(lambda tool, args: True)

        def approve(tool: str, args: dict[str, Any]) -> bool | Refusal:
            if tool == UNCONFINED_SHELL:
                # No OS sandbox confines it: a person who has seen the command decides, whatever
                # the approval setting and the rules say.
                return ask(tool, args)
            if tool not in GUARDED_TOOLS:
                return True
            return (asking if self.approvals else unattended)(tool, args)

        return approve

    # ---- agent messages (the only code that touches widgets for the agent) ------------------

    @on(TextDelta)
    async def on_text_delta(self, message: TextDelta) -> None:
        if self.activity.what != "writing":
            # The call's clock keeps running: "writing · 40s" counts from when the request went out.
            self.activity = self.activity.model_copy(update={"what": "writing", "short": None, "prompt_tokens": None})
        self.activity = self.activity.streamed(message.text)
        self.refresh_figures()
        await self.conversation.stream_text(message.text)

    @on(CallStarting)
    def on_call_starting(self, message: CallStarting) -> None:
        self.set_activity(f"waiting for {host_of(message.model)}", short="waiting", step=message.step,
                          prompt_tokens=message.prompt_tokens_estimate)

    @on(StreamVoided)
    async def on_stream_voided(self, message: StreamVoided) -> None:
        await self.conversation.void_text()
        await self.conversation.add_notice(
            f"attempt {message.attempt} failed ({message.error}); retrying in {message.delay_s:.1f}s — the text above is void",
            "warning",
        )

    @on(ToolStarted)
    async def on_tool_started(self, message: ToolStarted) -> None:
        self.set_activity(f"running {tool_title(message.name, message.args)}", short=f"running {message.name}")
        await self.conversation.add_tool(message.call_id, message.name, message.args)

    @on(ToolFinished)
    def on_tool_finished(self, message: ToolFinished) -> None:
        self.conversation.finish_tool(message.call_id, message.content, message.is_error, message.metadata)
        self.set_activity("thinking")

    @on(CallRecorded)
    async def on_call_recorded(self, message: CallRecorded) -> None:
        figure = message.figure.model_copy(update={"number": self.figures.next_number})
        self.figures.add(figure)
        if figure.error is None:
            self.prefix_clock.observe(figure.started_at, figure.usage)
        await self.cache_panel.add_call(figure)
        self.refresh_figures()

    @on(KeepAliveEnded)
    async def on_keep_alive_ended(self, message: KeepAliveEnded) -> None:
        self.warming = False
        if message.error is not None:
            await self.conversation.add_notice(f"keep-alive warm-up failed: {message.error}", "warning")
        self.refresh_figures()

    @on(EpochStarted)
    async def on_epoch_started(self, message: EpochStarted) -> None:
        if message.changes:
            self.prefix_clock.switch(self.link.provider, self.link.model)
            await self.conversation.add_notice(
                f"cache epoch {message.number}: {message.reason} — the cached prefix starts over", "warning"
            )
            self.refresh_figures()

    @on(ApprovalRequested)
    def on_approval_requested(self, message: ApprovalRequested) -> None:
        self.set_activity(f"awaiting approval: {message.tool}", short="approval?")

        def answered(answer: ApprovalAnswer | None) -> None:
            answer = answer or ApprovalAnswer(choice="deny")
            if answer.rule is not None and answer.choice == "session":
                self.permissions.allow_for_session(answer.rule)
            elif answer.rule is not None and answer.choice == "always":
                try:
                    self.permissions.allow_always(answer.rule)
                except (OSError, PermissionRuleError) as exc:
                    self.permissions.allow_for_session(answer.rule)
                    # The rule holds a command the model wrote: shown as typed, never as markup.
                    self.notify(visible(f"could not keep {answer.rule} in the config file ({exc}); allowed for this session"),
                                severity="warning", markup=False)  # fmt: skip
                else:
                    self.notify(visible(f"{answer.rule} is allowed from now on (kept in {self.permissions.config})"), markup=False)
            if not message.reply.done():
                message.reply.set_result(answer)
            self.set_activity(f"running {message.tool}" if answer.choice != "deny" else "thinking")

        rules = message.tool != UNCONFINED_SHELL  # an unconfined command is allowed once or not at all
        self.push_screen(
            ApprovalScreen(message.tool, message.args, can_save=rules and self.permissions.config is not None, offer_rules=rules),
            answered,
        )

    @on(HarnessTurnAdded)
    async def on_harness_turn(self, message: HarnessTurnAdded) -> None:
        kind = message.kind.replace("_", " ")
        await self.conversation.add_notice(f"{kind}: {message.reason}. The model was told: {message.text}", "warning")

    @on(TurnEnded)
    async def on_turn_ended(self, message: TurnEnded) -> None:
        await self.conversation.end_text()
        self.busy = False
        self._turn_running = False
        if message.outcome == "cancelled":
            self.conversation.cancel_running_tools()
            await self.conversation.add_notice("step cancelled; every call made so far is in the ledger", "warning")
        elif message.outcome == "failed":
            self.conversation.cancel_running_tools()
            await self.conversation.add_notice(f"the agent failed: {message.detail}", "error")
        elif message.outcome == "stopped":
            await self.conversation.add_notice(f"stopped: {message.detail}", "warning")
        elif message.detail and message.detail != ENDED:
            # The model's own end needs no notice; an end the harness decided (after a repair turn,
            # a submitted text-protocol task) says why.
            await self.conversation.add_notice(f"ended: {message.detail}", "info")
        self.set_activity("ready")
        if self._queued and not self.busy:
            await self.send_prompt(self._queued.pop(0))

    # ---- keys ------------------------------------------------------------------------------

    def action_cancel(self) -> None:
        if not self._turn_running:
            return
        self._cancel.set()
        self.set_activity("cancelling")

    def action_interrupt(self) -> None:
        """Ctrl-C, as in other agents: cancel the running step (and drop what was queued behind
        it); when nothing runs, ask whether to quit."""
        if self._turn_running:
            dropped = len(self._queued)
            self._queued.clear()
            self.action_cancel()
            if dropped:
                self.notify(f"{dropped} queued prompt(s) dropped")
            return
        if isinstance(self.screen, ConfirmScreen):
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(ConfirmScreen("Quit hitrate?", Text("Everything is already in the ledger."), yes="Quit", no="Stay"), answered)

    def action_scroll_conversation(self, direction: str) -> None:
        """PageUp / PageDown from the prompt box scroll the conversation; focus stays in the box."""
        conversation = self.conversation
        if direction == "up":
            conversation.scroll_page_up(animate=False)
        else:
            conversation.scroll_page_down(animate=False)

    def on_key(self, event: events.Key) -> None:
        # Whatever has focus (a tool panel after Tab, the conversation after a click), typed text
        # belongs in the prompt box.
        prompt_box = self.query_one(PromptInput)
        if self.screen is not self.screen_stack[0] or self.focused is prompt_box:
            return
        if event.is_printable and event.character:
            event.stop()
            prompt_box.focus()
            prompt_box.insert_at_cursor(event.character)

    def action_toggle_cache(self) -> None:
        self.cache_panel.toggle_class("-hidden")

    def action_toggle_tool_output(self) -> None:
        """Open the newest tool panel's whole output, or fold it back to its preview."""
        panel = self.conversation.newest_tool()
        if panel is not None:
            panel.collapsed = not panel.collapsed

    def action_external_editor(self) -> None:
        self.query_one(PromptInput).action_external_editor()

    async def action_help(self) -> None:
        await self.run_command_line("/help")

    async def action_show_cost(self) -> None:
        await self.run_command_line("/cost")

    async def on_unmount(self) -> None:
        self._cancel.set()
