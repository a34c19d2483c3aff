"""Dynamic context (date, cwd, git status, budget left, ...): only ever sent as a diff in the tail.

The first request carries every entry. Each later request carries only the entries that changed
since the context the model last saw (the frozen ContextBlocks in the transcript), so no byte that
was already sent is ever edited.
"""

from __future__ import annotations

from typing import Mapping

from hitrate.projection.transcript import ContextBlock

_REMOVED = "(removed)"


def _check_key(key: str) -> None:
    if not key or "\n" in key or ":" in key:
        raise ValueError(f"dynamic context key {key!r} must be non-empty, one line, without ':'")


def render_context(values: tuple[tuple[str, str | None], ...]) -> str:
    """The exact text sent for a context block: one `key: value` line per entry, keys sorted.

    Continuation lines of a multi-line value (e.g. a git status summary) are indented by two spaces,
    so a value can never be mistaken for another key.
    """
    lines = ["<context>"]
    for key, value in values:
        shown = _REMOVED if value is None else value.replace("\r\n", "\n").replace("\n", "\n  ")
        lines.append(f"{key}: {shown}")
    lines.append("</context>")
    return "\n".join(lines)


def context_delta(sent: Mapping[str, str], current: Mapping[str, str]) -> ContextBlock | None:
    """The block to append this turn: entries new or changed since `sent`, and removed ones.

    None when nothing changed (the model already knows everything in `current`).
    """
    changes: dict[str, str | None] = {}
    for key, value in current.items():
        _check_key(key)
        if not isinstance(value, str):
            raise TypeError(f"dynamic context value for {key!r} must be a str, not {type(value).__name__}")
        if sent.get(key) != value:
            changes[key] = value
    for key in sent:
        if key not in current:
            changes[key] = None
    if not changes:
        return None
    values = tuple(sorted(changes.items()))
    return ContextBlock(text=render_context(values), values=values)
