"""Files the user points the agent at: `@path` in a prompt and `/add FILE`.

A mentioned file's content is sent after the prompt text, in the new user message: appended to
the conversation, never spliced into what was sent before, so every cached prefix stays valid.
Paths go through the tools' sandbox: nothing outside the workspace can be mentioned.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from hitrate.tools.sandbox import IGNORED_DIR_NAMES, Sandbox, SandboxError

#: Larger files are refused (the agent can read them in parts with its own tools).
MAX_FILE_BYTES = 256 * 1024
#: Most candidates completion looks at (a huge tree must not freeze the prompt box).
MAX_SCAN = 20_000

# `@` at the start or after whitespace, then a path (no spaces; quotes are not supported).
_MENTION = re.compile(r"(?:(?<=\s)|^)@([^\s@]+)")


class MentionError(ValueError):
    """A mention or /add that cannot be sent; the message says why."""


def mentioned_paths(text: str) -> list[str]:
    """The `@path` words of a prompt, in order, each once (trailing punctuation dropped)."""
    seen: list[str] = []
    for match in _MENTION.finditer(text):
        path = match.group(1).rstrip(".,;:!?)")
        if path and path not in seen:
            seen.append(path)
    return seen


def file_block(workspace: Path, path: str) -> str:
    """The file as the model receives it: its workspace path, then its text."""
    sandbox = Sandbox(workspace)
    try:
        target = sandbox.resolve(path)
    except SandboxError as exc:
        raise MentionError(f"@{path}: {exc}") from exc
    shown = sandbox.display(target)
    if not target.is_file():
        raise MentionError(f"@{path}: no such file in the workspace")
    size = target.stat().st_size
    if size > MAX_FILE_BYTES:
        raise MentionError(f"{shown} is {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit for adding a file; "
                           "ask the agent to read the part you mean")
    data = target.read_bytes()
    if b"\0" in data[:8192]:
        raise MentionError(f"{shown} is a binary file; only text files can be added")
    text = data.decode("utf-8", errors="replace")
    return f'<file path="{shown}">\n{text}{"" if text.endswith(chr(10)) else chr(10)}</file>'


def expand_mentions(workspace: Path, text: str) -> tuple[list[str], list[str]]:
    """(blocks to append, problems): one block per mentioned file that can be sent. A word that
    starts with @ but names no file (an e-mail, a decorator) is left as plain text."""
    blocks: list[str] = []
    problems: list[str] = []
    for path in mentioned_paths(text):
        try:
            blocks.append(file_block(workspace, path))
        except MentionError as exc:
            if "no such file" not in str(exc):
                problems.append(str(exc))
    return blocks, problems


def workspace_files(workspace: Path) -> list[str]:
    """Workspace-relative paths of files (and folders, with a trailing /), skipping ignored folders."""
    found: list[str] = []
    root = str(workspace)
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIR_NAMES and not d.startswith("."))
        rel = os.path.relpath(folder, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        found.extend(prefix + d + "/" for d in dirs)
        found.extend(prefix + f for f in sorted(files))
        if len(found) > MAX_SCAN:
            break
    return found


def complete(workspace: Path, partial: str) -> tuple[str, list[str]]:
    """Complete a path: (the longest common completion, the matching candidates). Matches the
    start of the path first, then, if nothing does, any path containing `partial`."""
    candidates = workspace_files(workspace)
    matches = [c for c in candidates if c.startswith(partial)]
    if not matches:
        matches = [c for c in candidates if partial.lower() in c.lower()]
        if len(matches) == 1:
            return matches[0], matches
        return partial, matches
    # Within one folder level: "src/" completes to its children, not to every file below it.
    depth = partial.count("/")
    level = [m for m in matches if m.count("/") == depth or (m.count("/") == depth + 1 and m.endswith("/"))]
    shown = level or matches
    return os.path.commonprefix(shown), shown
