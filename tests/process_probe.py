"""Finding a test's processes on the host by a distinctive argument: a confined command runs in its
own PID namespace, so the pids it sees are not the host's."""

from __future__ import annotations

import time
from pathlib import Path


def processes_running(argument: str) -> list[int]:
    """Host pids of live processes with `argument` in their command line.

    A confined command runs in its own PID namespace, so the pids it sees are not the host's:
    tests find its processes by a distinctive argument instead (e.g. `sleep 61.25`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argument.encode() in args and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def gone_within(argument: str, seconds: float = 3.0) -> bool:
    """True once no live process has `argument` in its command line (waiting up to `seconds`)."""
    end = time.monotonic() + seconds
    while processes_running(argument):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True
