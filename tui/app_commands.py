"""Slash commands of the app: /model, /effort, /cost, /clear, /resume, /add, /undo, /approve, /keepalive,
/init, /help, /quit, and the Markdown commands of `hitrate.tui.custom_commands`.

They run on the app's event loop, between turns, and change widgets directly (they are user
actions, not agent output).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work

from hitrate.harness.checkpoints import CheckpointError
from hitrate.tui.cache_panel import NARROW
from hitrate.tui.commands import COMMANDS, CommandError, command_name, help_markdown, parse_command
from hitrate.tui.custom_commands import INIT_PROMPT, load_commands
from hitrate.tui.dialogs import ConfirmScreen, HelpScreen
from hitrate.tui.figures import SessionFigures, fmt_ratio, fmt_tokens, fmt_usd, one_line
from hitrate.tui.keepalive_view import decision_text, keepalive_markdown
from hitrate.tui.link import ResumedSession, estimate_switch
from hitrate.tui.mentions import MentionError, file_block
from hitrate.tui.messages import Notice, ModelSwitched

if TYPE_CHECKING:
    from hitrate.tui.app import HitrateApp

_KEYS = [
    ("enter", "send the prompt (or run the /command); while the agent works, it is queued"),
    ("ctrl+j / shift+enter", "new line in the prompt (shift+enter only where the terminal reports it)"),
    ("ctrl+g", "edit the prompt in $VISUAL / $EDITOR"),
    ("up / down", "walk through earlier prompts (from the first / last line of the prompt)"),
    ("pageup / pagedown", "scroll the conversation"),
    ("ctrl+c", "cancel the current step; when idle, asks whether to quit"),
    ("esc", "cancel the current step (what was recorded stays recorded)"),
    ("f1", "this help"),
    ("f2", "session cost (/cost)"),
    ("ctrl+b", "show or hide the cache panel"),
    ("ctrl+o", "open the newest tool panel's whole output, or fold it back to its last lines"),
    ("ctrl+q", "quit"),
]

#: Commands that would disturb a turn in progress.
_IDLE_ONLY = {"model", "effort", "clear", "resume", "undo", "compact", "refresh"}


def cost_markdown(figures: SessionFigures, *, compact: bool = False) -> str:
    """The /cost report: buckets, the Σ-hit ratio, cost, and every miss with its price. Compact (a
    narrow screen): the same figures as a list, since eight table columns do not fit 50 cells."""
    t = figures.totals()
    unknown = ", ".join(f"{b} in {n}" for b, n in t.unknown.items() if b != "reasoning")
    figures_row = [
        ("calls", str(t.calls)), ("cache read", fmt_tokens(t.cache_read)), ("cache write", fmt_tokens(t.cache_write_total)),
        ("fresh input", fmt_tokens(t.fresh_input)), ("output", fmt_tokens(t.output)), ("Σ-hit ratio", fmt_ratio(t.hit_ratio)),
        ("calls with a hit", fmt_ratio(t.calls_with_hit_share)), ("cost", fmt_usd(t.cost_usd)),
    ]
    lines = ["**Session cost**", ""]
    if compact:
        lines += [f"- {name}: **{value}**" for name, value in figures_row]
    else:
        lines += [
            "| " + " | ".join(name for name, _ in figures_row) + " |",
            "|" + "---:|" * len(figures_row),
            "| " + " | ".join(value for _, value in figures_row) + " |",
        ]
    if t.unpriced_calls:
        lines += ["", f"{t.unpriced_calls} call(s) have no price and are not in the cost."]
    if unknown:
        lines += ["", f"Not reported by the provider (left out of the sums, never counted as 0): {unknown}."]
    misses = figures.misses()
    if misses:
        lines += ["", "**Misses**", ""]
        for call in misses:
            extra = f" — cost {fmt_usd(call.miss_cost_usd)} more than a hit" if call.miss_cost_usd is not None else ""
            tokens = f", {fmt_tokens(call.miss_tokens)} tokens not read from cache" if call.miss_tokens is not None else ""
            lines.append(f"- call #{call.number} ({call.model}): `{call.miss_reason}`{tokens}{extra}")
        total = figures.miss_cost_usd()
        if total is not None:
            lines += ["", f"Misses cost {fmt_usd(total)} in all."]
    warmups = figures.keepalive_calls()
    if warmups:
        spent = [c.cost_usd for c in warmups if c.cost_usd is not None]
        lines += ["", f"Keep-alive warm-ups: {len(warmups)}, {fmt_usd(sum(spent) if spent else None)} "
                  "(included above; `/keepalive` says why they were sent)."]
    return "\n".join(lines)


class CommandsMixin:
    """Mixed into HitrateApp."""

    async def run_command_line(self: "HitrateApp", text: str) -> None:
        name = command_name(text)
        custom = load_commands(self.workspace, reserved=frozenset(COMMANDS))
        if name in custom:
            # A Markdown command is a prompt: it is sent (or queued) like one, as the user typed it.
            prompt = custom[name].prompt(text.strip()[1 + len(name):].strip())
            if self.busy:
                self._queued.append(prompt)
                await self.conversation.add_notice(f"queued /{name} (sent when the agent stops)")
            else:
                await self.send_prompt(prompt)
            return
        try:
            command = parse_command(text, custom)
        except CommandError as exc:
            self.conversation.follow()
            await self.conversation.add_notice(str(exc), "error")
            return
        if self.busy and command.name in _IDLE_ONLY:
            await self.conversation.add_notice(f"/{command.name} waits until the agent stops (Esc cancels the step)", "warning")
            return
        handler = getattr(self, f"_command_{command.name}")
        if command.name != "help":  # /help opens over the conversation and leaves its scroll alone
            # A command's output is what the user asked to see: bring the view down to it.
            self.conversation.follow()
        await handler(command.arg)

    async def _command_help(self: "HitrateApp", arg: str) -> None:
        custom = load_commands(self.workspace, reserved=frozenset(COMMANDS))
        if isinstance(self.screen, HelpScreen):
            return
        # Over the conversation, not in it: forty lines of help would push the work out of view.
        self.push_screen(HelpScreen(help_markdown(_KEYS, {n: c.description for n, c in custom.items()})))

    async def _command_init(self: "HitrateApp", arg: str) -> None:
        if self.busy:
            self._queued.append(INIT_PROMPT)
            await self.conversation.add_notice("queued /init (sent when the agent stops)")
            return
        await self.send_prompt(INIT_PROMPT)

    async def _command_refresh(self: "HitrateApp", arg: str) -> None:
        changes = self.link.refresh_head()
        if changes:
            await self.conversation.add_notice(
                f"refreshed {' and '.join(changes)}: the next request starts a new cache epoch", "warning"
            )
        else:
            await self.conversation.add_notice("the project docs, system prompt and tools are as the session has them")

    async def _command_cost(self: "HitrateApp", arg: str) -> None:
        await self.conversation.add_markdown(cost_markdown(self.figures, compact=self.screen.has_class(NARROW)))

    async def _command_add(self: "HitrateApp", arg: str) -> None:
        if self.workspace is None:
            await self.conversation.add_notice("/add needs a workspace", "error")
            return
        for path in arg.split():
            try:
                block = file_block(self.workspace, path.removeprefix("@"))
            except MentionError as exc:
                await self.conversation.add_notice(str(exc), "error")
                continue
            self.pending_notes.append(block)
            lines = block.count("\n") - 1
            await self.conversation.add_notice(f"{path} ({lines} lines) will be sent with your next prompt")

    async def _command_undo(self: "HitrateApp", arg: str) -> None:
        if self.checkpoints is None:
            await self.conversation.add_notice("/undo is not available: no checkpoints are being taken", "error")
            return
        try:
            result = self.checkpoints.undo()
        except CheckpointError as exc:
            await self.conversation.add_notice(f"/undo failed: {exc}", "error")
            return
        if result is None:
            await self.conversation.add_notice("nothing to undo: no turn of this sitting changed a file")
            return
        parts = []
        if result.restored:
            parts.append("restored " + ", ".join(result.restored))
        if result.removed:
            parts.append("removed " + ", ".join(result.removed))
        if result.skipped:
            parts.append("left alone (changed again since): " + ", ".join(result.skipped))
        done = "; ".join(parts)
        await self.conversation.add_notice(f"undid the turn “{one_line(result.label, 40)}”: {done}")
        if result.restored or result.removed:
            # The model's picture of the files is now stale: tell it with the next prompt (an
            # appended block; the history it already has stays byte-identical).
            self.pending_notes.append(f"[The user undid the file changes of an earlier turn: {done}.]")

    async def _command_quit(self: "HitrateApp", arg: str) -> None:
        self.exit()

    async def _command_approve(self: "HitrateApp", arg: str) -> None:
        self.approvals = arg.lower() == "on"
        state = "asks before shell commands and file writes" if self.approvals else "runs shell commands and writes files without asking"
        await self.conversation.add_notice(f"the agent now {state}")

    async def _command_keepalive(self: "HitrateApp", arg: str) -> None:
        if arg:
            on = arg.lower() == "on"
            self.link.set_keepalive(on)
            self.keepalive_toggled = True
            decision = self.link.keepalive(self.clock())
            if not on:
                await self.conversation.add_notice("keep-alive off: an idle session's cached prefix is left to expire")
            elif decision.action == "skip":
                await self.conversation.add_notice(f"keep-alive on, but nothing will be warmed now: {decision.reason}")
            else:
                await self.conversation.add_notice(f"keep-alive on: {decision_text(decision, self.clock())}")
            self.refresh_figures()
            return
        now = self.clock()
        enabled = self.link.keepalive_enabled
        await self.conversation.add_markdown(keepalive_markdown(self.link.keepalive(now), now, enabled=enabled, figures=self.figures))

    async def _command_effort(self: "HitrateApp", arg: str) -> None:
        before = self.link.effort
        if not arg:
            await self.conversation.add_notice(f"effort: {before or 'the model default'} (/effort low|medium|high|max|default)")
            return
        level = None if arg.lower() == "default" else arg.lower()
        if level == before:
            await self.conversation.add_notice(f"effort is already {before or 'the model default'}")
            return
        self.link.set_effort(level)
        await self.conversation.add_notice(
            f"effort {before or 'default'} -> {level or 'default'} from the next call: a new cache epoch", "warning"
        )

    async def _command_model(self: "HitrateApp", arg: str) -> None:
        try:
            provider, model, label = self.link.check_model(arg)
        except ValueError as exc:
            await self.conversation.add_notice(str(exc), "error")
            return
        if label == self.link.model_label:
            await self.conversation.add_notice(f"already on {label}")
            return
        estimate = estimate_switch(self.figures.last, self.link.model, self.link.model_label, label, model, provider, self.clock())

        async def confirmed(yes: bool | None) -> None:
            if not yes:
                await self.conversation.add_notice(f"kept {self.link.model_label}")
                return
            # Resolving a backend can take long (the local engine loads its weights): off the loop.
            self.busy = True
            self.set_activity(f"switching to {label}", short="switching model")
            self._switch_model(arg)

        await self.conversation.add_notice(estimate.message(), "warning")
        self.push_screen(
            ConfirmScreen("Switch model?", Text(estimate.message()), yes="Switch", no="Stay"),
            confirmed,
        )

    async def _command_compact(self: "HitrateApp", arg: str) -> None:
        self.busy = True
        self.set_activity("compacting")
        self._compact_worker()

    @work(thread=True, group="compact", exit_on_error=False)
    def _compact_worker(self: "HitrateApp") -> None:
        try:
            text, kind = self.link.compact(self.post_message), "info"
        except Exception as exc:  # a failed summary call is recorded; the history stays as it was
            text, kind = f"/compact failed, the history is unchanged: {exc}", "error"
        self.post_message(Notice(text, kind))
        self.call_from_thread(self._compact_done)

    def _compact_done(self: "HitrateApp") -> None:
        self.busy = False
        self.set_activity("ready")

    @work(thread=True, group="switch", exit_on_error=False)
    def _switch_model(self: "HitrateApp", spec: str) -> None:
        try:
            self.link.switch_model(spec)
        except Exception as exc:  # a bad key, an unreachable server, weights that do not load
            self.post_message(ModelSwitched(spec, f"could not switch to {spec}: {exc}"))
        else:
            self.post_message(ModelSwitched(spec))

    # Named, not @on-decorated: the decorator's registry only sees classes built by Textual's
    # metaclass, and this mixin is not one.
    async def on_model_switched(self: "HitrateApp", message: ModelSwitched) -> None:
        self.busy = False
        if message.error is not None:
            await self.conversation.add_notice(message.error, "error")
        else:
            self.prefix_clock.switch(self.link.provider, self.link.model)
            await self.conversation.add_notice(
                f"now on {self.link.model_label}; the next call starts a new cache epoch", "warning"
            )
        self.set_activity("ready")

    async def _command_clear(self: "HitrateApp", arg: str) -> None:
        self.link.new_session()
        await self.conversation.clear()
        await self.cache_panel.clear_calls()
        self.figures.clear()
        # The tools + system head is the same bytes for the same model, so its cache entry (and
        # the clock that says how warm it is) carries over to the new session.
        await self.conversation.add_notice(
            f"new session on {self.link.model_label}; the cached tools + system head is reused while warm"
        )
        self.refresh_figures()

    async def _command_resume(self: "HitrateApp", arg: str) -> None:
        if not arg:
            await self._list_sessions()
            return
        try:
            resumed = self.link.resume(arg)
        except (KeyError, ValueError) as exc:
            message = exc.args[0] if exc.args else str(exc)
            await self.conversation.add_notice(str(message), "error")
            return
        await self.show_resumed(resumed)

    async def _list_sessions(self: "HitrateApp") -> None:
        sessions = self.link.recent_sessions()
        if not sessions:
            await self.conversation.add_notice("no earlier sessions in the ledger")
            return
        lines = ["**Recent sessions** (`/resume <id>`)", ""]
        if self.screen.has_class(NARROW):
            # Six table columns in 50 cells would cut every one of them: a list instead.
            for s in sessions:
                prompt = one_line(s.first_prompt.replace("`", "'"), 40)
                lines.append(f"- `{s.id}` {s.started_at:%m-%d %H:%M} · {s.calls} calls · {fmt_usd(s.cost_usd)} · {prompt}")
        else:
            lines += ["| id | started (UTC) | model | calls | cost | first prompt |", "|---|---|---|---:|---:|---|"]
            for s in sessions:
                prompt = s.first_prompt.replace("|", "\\|").replace("\n", " ")[:40]
                lines.append(
                    f"| `{s.id}` | {s.started_at:%Y-%m-%d %H:%M} | {s.model or '?'} | {s.calls} | {fmt_usd(s.cost_usd)} | {prompt} |"
                )
        await self.conversation.add_markdown("\n".join(lines))

    async def show_resumed(self: "HitrateApp", resumed: ResumedSession) -> None:
        """Put a resumed session back on screen: its transcript, then its calls and figures; and
        work where it worked (its workspace, for mentions and /undo)."""
        if resumed.workspace is not None and (self.workspace is None or Path(resumed.workspace) != self.workspace):
            self.move_to_workspace(Path(resumed.workspace))
        await self.conversation.clear()
        await self.cache_panel.clear_calls()
        self.figures.clear()
        self.prefix_clock.switch(self.link.provider, self.link.model)
        for item in resumed.items:
            if item.kind == "user":
                await self.conversation.add_user(item.text)
            elif item.kind == "assistant":
                await self.conversation.add_markdown(item.text, "assistant")
            else:
                await self.conversation.add_tool(item.call_id, item.tool, item.args)
                self.conversation.finish_tool(item.call_id, item.text, item.is_error, item.metadata)
        for figure in resumed.calls:
            self.figures.add(figure)
            if figure.error is None and figure.model == self.link.model:
                self.prefix_clock.observe(figure.started_at, figure.usage)
            await self.cache_panel.add_call(figure)
        for note in resumed.notes:
            await self.conversation.add_notice(note, "warning")
        where = f" in {self.workspace}" if self.workspace is not None else ""
        await self.conversation.add_notice(
            f"resumed session {resumed.session_id} ({len(resumed.calls)} calls) on {self.link.model_label}{where}"
        )
        self.refresh_figures()
