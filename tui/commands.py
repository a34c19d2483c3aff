"""Slash commands typed into the prompt box: parsing and the help text.

Parsing is pure; the app decides what each command does. Anything starting with "/" is a
command, so a typo is reported instead of being sent to the model as a prompt.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

CommandName = Literal[
    "model", "effort", "cost", "clear", "help", "resume", "approve", "keepalive", "undo", "add", "init", "compact", "quit"
]

EFFORT_ARGS = ("low", "medium", "high", "max", "default")
"""What /effort takes: a level, or `default` for the model's own."""


class CommandError(ValueError):
    """A line starting with "/" that is not a valid command; the message says what to type."""


class Command(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: CommandName
    arg: str = ""


class CommandHelp(BaseModel):
    model_config = ConfigDict(frozen=True)

    usage: str
    summary: str


COMMANDS: dict[str, CommandHelp] = {
    "model": CommandHelp(
        usage="/model <spec>",
        summary="switch model or backend (anthropic/…, openai/…, deepseek/…, gemini/…, "
        "openai-compat/<model>@<url>, local/<path>); shows what the new cache epoch costs, then asks",
    ),
    "effort": CommandHelp(
        usage="/effort [low|medium|high|max|default]",
        summary="the reasoning effort every call asks for, in the backend's own parameter; a change starts "
        "a cache epoch. Without an argument, the current one",
    ),
    "cost": CommandHelp(usage="/cost", summary="tokens per bucket, Σ-hit ratio, cost and every miss of this session"),
    "clear": CommandHelp(usage="/clear", summary="start a new session (empty history; the cached tools + system head stays reusable)"),
    "resume": CommandHelp(usage="/resume [session-id]", summary="list recent sessions, or resume one from the ledger"),
    "approve": CommandHelp(usage="/approve on|off", summary="ask before shell commands and file writes, or not"),
    "keepalive": CommandHelp(
        usage="/keepalive [on|off]",
        summary="warm an idle session's cached prefix before it expires, when that is expected to pay; "
        "without an argument, what the warmer will do and why",
    ),
    "add": CommandHelp(
        usage="/add FILE [FILE …]",
        summary="send these workspace files with your next prompt (as `@path` in a prompt does), appended "
        "after it: the history already sent, and its cache, stay as they are",
    ),
    "undo": CommandHelp(
        usage="/undo",
        summary="put back the files the last turn changed (created, edited, deleted; by tools or shell commands); "
        "again for the turn before. Your own git history and index are never touched",
    ),
    "compact": CommandHelp(
        usage="/compact",
        summary="summarize the history now and go on from the summary and the recent turns; the summary "
        "request reads the history from the cache, and tools, system prompt and docs stay cached",
    ),
    "init": CommandHelp(usage="/init", summary="ask the agent to write (or improve) AGENTS.md for this project"),
    "help": CommandHelp(usage="/help", summary="this list"),
    "quit": CommandHelp(usage="/quit", summary="leave (everything is already in the ledger)"),
}

_TAKES_ARG = {"add": "required", "model": "required", "resume": "optional", "approve": "required", "keepalive": "optional",
              "effort": "optional"}


def is_command(text: str) -> bool:
    return text.lstrip().startswith("/")


def command_name(text: str) -> str:
    """The lower-cased name of a "/name [arg]" line."""
    return text.strip()[1:].partition(" ")[0].lower()


def parse_command(text: str, custom: Collection[str] = ()) -> Command:
    """Parse "/name [arg]". Raises CommandError for unknown names and missing or extra args;
    `custom`: the names of Markdown commands, listed in the error as known too."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        raise CommandError(f"{text!r} is not a command (commands start with /)")
    head, _, rest = stripped[1:].partition(" ")
    name = head.lower()
    arg = rest.strip()
    if name not in COMMANDS:
        known = ", ".join(f"/{n}" for n in [*COMMANDS, *sorted(custom)])
        raise CommandError(f"unknown command /{head}; known: {known}")
    need = _TAKES_ARG.get(name)
    if need == "required" and not arg:
        raise CommandError(f"usage: {COMMANDS[name].usage}")
    if need is None and arg:
        raise CommandError(f"/{name} takes no argument (usage: {COMMANDS[name].usage})")
    if name == "approve" and arg.lower() not in ("on", "off"):
        raise CommandError(f"usage: {COMMANDS['approve'].usage}")
    if name == "keepalive" and arg.lower() not in ("", "on", "off"):
        raise CommandError(f"usage: {COMMANDS['keepalive'].usage}")
    if name == "effort" and arg and arg.lower() not in EFFORT_ARGS:
        raise CommandError(f"usage: {COMMANDS['effort'].usage}")
    return Command(name=name, arg=arg)  # type: ignore[arg-type]


def _markdown_text(text: str) -> str:
    """`text` shown literally in markdown: placeholders like `<model>` would otherwise be parsed
    as inline HTML tags and vanish from the rendered help."""
    return text.replace("\\", "\\\\").replace("<", "\\<").replace(">", "\\>")


def help_markdown(key_help: list[tuple[str, str]], custom: Mapping[str, str] | None = None) -> str:
    """The /help text as markdown: commands, custom commands (name -> description), then keys."""
    lines = ["**Commands**", ""]
    lines += [f"- `{h.usage}` — {_markdown_text(h.summary)}" for h in COMMANDS.values()]
    if custom:
        lines += ["", "**Your commands** (Markdown files in .hitrate/commands/ and the user config folder)", ""]
        lines += [f"- `/{name} [args]` — {_markdown_text(what)}" for name, what in sorted(custom.items())]
    lines += ["", "**Keys**", ""]
    lines += [f"- `{key}` — {_markdown_text(what)}" for key, what in key_help]
    return "\n".join(lines)
