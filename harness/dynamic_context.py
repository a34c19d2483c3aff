"""The dynamic context sent with each turn: values that change between runs or turns.

They never enter the static head (that would bust the cache on every run); the projection appends
only the entries that changed to the newest user message. The date is day-granular on purpose: a
clock with minutes would produce a new context block every turn.
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

ContextProvider = Callable[[], dict[str, str]]


def git_summary(workspace: Path, timeout_s: float = 2.0) -> str | None:
    """`branch <name>, N changed files` for a git work tree; None outside one or without git."""
    if not (workspace / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(workspace), "status", "--porcelain=v1", "--branch"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    lines = out.stdout.splitlines()
    branch = "unknown"
    if lines and lines[0].startswith("## "):
        branch = lines[0][3:].split("...")[0].strip() or branch
        lines = lines[1:]
    changed = len([line for line in lines if line.strip()])
    return f"branch {branch}, {changed} changed file{'s' if changed != 1 else ''}"


def workspace_context(workspace: Path, *, today: Callable[[], str] | None = None) -> dict[str, str]:
    """Date (UTC day), workspace path and git state."""
    day = today() if today is not None else datetime.now(timezone.utc).strftime("%Y-%m-%d")
    values = {"date": day, "workspace": str(workspace)}
    git = git_summary(workspace)
    if git is not None:
        values["git"] = git
    return values
