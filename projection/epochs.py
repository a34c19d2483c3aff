"""When a new epoch starts: the one rule the projector, the session's restored epochs and the naive
layout use to tell what changed between two requests' heads.

An epoch is a stretch of requests with one model, tool set, system prompt and docs. The head is
compared part by part: either the parts' own bytes (every changed part is named) or their chained
hashes (a change makes every later hash differ too, so only the first differing part is named).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

HEAD_PARTS: tuple[tuple[str, str], ...] = (
    ("tools", "tools changed"),
    ("system", "system prompt changed"),
    ("docs", "project docs changed"),
)


def head_changes(
    before_model: str,
    after_model: str,
    before_head: Sequence[Any],
    after_head: Sequence[Any],
    *,
    chained: bool,
    describe: Callable[[str], str] | None = None,
    before_effort: str | None = None,
    after_effort: str | None = None,
) -> tuple[list[str], list[str]]:
    """(changed parts, their descriptions) between two requests: any of "model", "effort", "tools",
    "system", "docs". `describe(part)` may give a more detailed description of a changed part.

    Effort (the reasoning effort asked for; None for the model's default) counts as a change of the
    head as a model switch does: a provider may key its cache on thinking settings (Anthropic: a
    change of thinking parameters invalidates cached message prefixes)."""
    changes: list[str] = []
    parts: list[str] = []
    if before_model != after_model:
        changes.append("model")
        parts.append(f"model {before_model} -> {after_model}")
    if before_effort != after_effort:
        changes.append("effort")
        parts.append(f"effort {before_effort or 'default'} -> {after_effort or 'default'}")
    for (name, text), a, b in zip(HEAD_PARTS, before_head, after_head):
        if a != b:
            changes.append(name)
            parts.append((describe(name) if describe else None) or text)
            if chained:
                break
    return changes, parts
