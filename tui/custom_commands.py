"""Slash commands written as Markdown files, the way Claude Code and pi read them.

`/review src/app.py` runs `review.md` from the project's `.hitrate/commands/` folder, else from
the user's (`commands/` beside the config file, e.g. ~/.config/hitrate/commands/): the file's text, with
`$ARGUMENTS` replaced by what follows the command (appended on a line of its own when the file has
no `$ARGUMENTS`), is sent as the prompt. An optional front matter gives the line /help shows:

    ---
    description: Review a file for bugs
    ---
    Review $ARGUMENTS for bugs and say what you would change.

A project command wins over a user command of the same name; a built-in command wins over both.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from hitrate.harness.defaults import config_path

PROJECT_FOLDER = Path(".hitrate") / "commands"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


class CustomCommand(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    body: str
    source: Path

    def prompt(self, arguments: str) -> str:
        """The prompt this command sends with `arguments`."""
        if "$ARGUMENTS" in self.body:
            return self.body.replace("$ARGUMENTS", arguments).strip()
        return self.body.strip() + (f"\n\n{arguments}" if arguments else "")


def user_folder() -> Path:
    """`commands/` beside the config file (so $HITRATE_CONFIG moves both)."""
    return config_path().parent / "commands"


def _split_front_matter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---", 4)
    if end == -1:
        return {}, text
    meta: dict[str, str] = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip().lower()] = value.strip().strip("\"'")
    rest = text[end + 4:]
    return meta, rest[1:] if rest.startswith("\n") else rest


def read_command(path: Path) -> CustomCommand:
    meta, body = _split_front_matter(path.read_text(encoding="utf-8", errors="replace"))
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    description = meta.get("description") or first[:80]
    return CustomCommand(name=path.stem.lower(), description=description, body=body, source=path)


def load_commands(workspace: Path | None, user: Path | None = None, *, reserved: frozenset[str] = frozenset()) -> dict[str, CustomCommand]:
    """Custom commands by name: the user's, then the project's over them; names taken by a
    built-in command, or that cannot be typed as a command, are left out."""
    folders = [user if user is not None else user_folder()]
    if workspace is not None:
        folders.append(workspace / PROJECT_FOLDER)
    found: dict[str, CustomCommand] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.md")):
            name = path.stem.lower()
            if _NAME.match(name) and name not in reserved and path.is_file():
                found[name] = read_command(path)
    return found


INIT_PROMPT = """Write an AGENTS.md file at the root of this workspace for coding agents that will work here.

Look at the project first (list the files, read the README, the build and test configuration, a few central modules). Then write, concisely:
- what the project is and how its code is laid out (the main folders and what each holds);
- how to set it up, build it, run it and run its tests (the exact commands);
- the conventions the code follows (style, naming, error handling, how tests are written);
- anything an agent must not do or must be careful with.

If AGENTS.md already exists, read it and improve it rather than starting over. Keep it under about 150 lines."""
