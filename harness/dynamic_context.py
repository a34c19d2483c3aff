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

from hitrate.tools.trusted_programs import inside, minimal_env, trusted_program

ContextProvider = Callable[[], dict[str, str]]


# The harness runs git on a repository the agent may have changed, so nothing in it may run a
# program: no hooks (status can fire post-index-change), no fsmonitor daemon (core.fsmonitor is any
# command), no optional index writes, no submodule recursion (submodules have configs of their own).
# Filter drivers are neutralised one by one below, since git has no switch that disables them all.
_SAFE_GIT_CONFIG: tuple[str, ...] = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.pager=cat",
    "submodule.recurse=false",
)


def _git_env() -> dict[str, str]:
    # A minimal environment: no API keys for a program git might start, no GIT_DIR, GIT_CONFIG_*
    # or GIT_EXEC_PATH from the user's shell steering git elsewhere, and the system PATH only (a
    # workspace virtualenv's bin first on PATH could hold a planted program git starts).
    return minimal_env(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_CONFIG_NOSYSTEM="1")


def safe_git(workspace: Path, *args: str, timeout_s: float = 2.0) -> subprocess.CompletedProcess[str] | None:
    """Run `git -C workspace <args>` so that the repository's own config cannot run a program;
    None when git is missing or does not finish in time. git comes from a system folder, never from
    PATH: the agent's shell can write `.venv/bin/git` in the workspace."""
    git = trusted_program("git")
    if git is None or inside(git, workspace):
        return None
    base = [git, "--no-optional-locks", "-C", str(workspace)]
    for item in _SAFE_GIT_CONFIG:
        base += ["-c", item]
    env = _git_env()
    try:
        # Reading config runs nothing; each filter driver it names is replaced by a no-op.
        drivers = subprocess.run([*base, "config", "--name-only", "--get-regexp", r"^filter\."],
                                 capture_output=True, text=True, timeout=timeout_s, check=False, env=env)  # fmt: skip
        for name in sorted({line.rsplit(".", 1)[0] for line in drivers.stdout.splitlines() if line.count(".") >= 2}):
            base += ["-c", f"{name}.clean=cat", "-c", f"{name}.smudge=cat", "-c", f"{name}.process="]
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=env, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None


def git_summary(workspace: Path, timeout_s: float = 2.0) -> str | None:
    """`branch <name>, N changed files` for a git work tree; None outside one or without git."""
    if not (workspace / ".git").exists():
        return None
    out = safe_git(workspace, "status", "--porcelain=v1", "--branch", "--ignore-submodules=all", timeout_s=timeout_s)
    if out is None or out.returncode != 0:
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
