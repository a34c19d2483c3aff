"""Unified diffs of file changes, in the form git prints them (for the TUI and the ledger)."""

from __future__ import annotations

import difflib

_NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(old: str, new: str, path: str, *, created: bool = False, context: int = 3) -> str:
    """A unified diff from `old` to `new`; '' when they are equal.

    difflib leaves a last line without a newline glued to the next hunk line, so such lines get
    git's "\\ No newline at end of file" marker instead.
    """
    if old == new:
        return ""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if created else f"a/{path}",
        tofile=f"b/{path}",
        n=context,
    )
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n")
            out.append(_NO_NEWLINE)
    return "".join(out)
