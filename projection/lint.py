"""Pre-flight checks of a Prompt: what would bust or waste the cache before a request is ever sent.

The head (tools, system, docs) is meant to stay byte-identical for a whole session; anything that
looks like it varies per run (a clock, a date, an id, a counter, a temp path, the cwd) found there
will change it sooner or later. Marks are checked against the provider's limits.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict

from hitrate.projection.caching import CacheRules
from hitrate.projection.canonical import canonical_bytes
from hitrate.projection.diffpath import json_path_child
from hitrate.projection.caching.ttl import TTL_SECONDS
from hitrate.projection.prompt import Prompt, Section

Severity = Literal["error", "warning", "info"]


class Finding(BaseModel):
    """One lint result."""

    model_config = ConfigDict(frozen=True)

    code: str
    severity: Severity
    section: str | None
    """Section label ("tools", "system", "docs", "history[3]"), None for prompt-wide findings."""
    message: str
    location: str | None = None
    """"line N" in text, a JSON path in JSON, "breakpoint N" for marks."""


_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
VOLATILE_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("volatile_uuid", "a UUID", re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)),
    (
        "volatile_date",
        "a date",
        re.compile(
            rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|\b{_MONTH} \d{{1,2}},? \d{{4}}\b|\b\d{{1,2}} {_MONTH} \d{{4}}\b"
        ),
    ),
    ("volatile_time", "a clock time", re.compile(r"\b(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?:\s?[AaPp][Mm])?\b")),
    (
        "volatile_counter",
        "a counter",
        re.compile(
            r"\b(?:turn|request|call|attempt|iteration|message|session|run)\s*(?:#|no\.?\s*)?\d+\b"
            r"|\b\d[\d,]*\s*(?:tokens?|requests?|calls?|turns?|steps?)\s+(?:used|left|remaining|so far)\b"
            r"|\b(?:budget|remaining|left|used)\s*[:=]\s*\$?\d",
            re.I,
        ),
    ),
    (
        "volatile_temp_path",
        "a temporary path",
        re.compile(r"(?:/tmp/|/var/folders/|/private/var/folders/|/dev/shm/|\\AppData\\Local\\Temp\\)\S*|\btmp[a-z0-9_]{6,}\b", re.I),
    ),
)


def _json_strings(value: Any, path: str = "$") -> Iterator[tuple[str, str]]:
    """Every string (keys included) in a JSON value, with its path."""
    if isinstance(value, dict):
        for key in value:
            sub = json_path_child(path, key)
            yield sub, str(key)
            yield from _json_strings(value[key], sub)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _json_strings(item, json_path_child(path, i))
    elif isinstance(value, str):
        yield path, value


def _texts(section: Section) -> Iterator[tuple[str, str]]:
    """(location, text) pieces of a head section: JSON strings for tools, lines for text."""
    if section.kind == "tools":
        yield from _json_strings(json.loads(section.data) if section.data else [])
    elif section.kind == "docs":
        yield from _doc_lines(section.text)
    else:
        for n, line in enumerate(section.text.split("\n"), start=1):
            yield f"line {n}", line


_DOC_OPEN = re.compile(r'^<doc path="([^"]*)"[^>]*>$')


def _doc_lines(text: str) -> Iterator[tuple[str, str]]:
    """Lines of the docs section located in the file they came from ("AGENTS.md line 2"): the
    section wraps each file in `<doc path=...>` tags, so its own line numbers point nowhere a
    user can open."""
    path: str | None = None
    n_in_doc = 0
    for n, line in enumerate(text.split("\n"), start=1):
        opening = _DOC_OPEN.match(line)
        if opening:
            path, n_in_doc = opening.group(1), 0
            continue
        if path is not None and line == "</doc>":
            path = None
            continue
        if path is None:
            yield f"line {n}", line
        else:
            n_in_doc += 1
            yield f"{path} line {n_in_doc}", line


# A user's home directory in a tool schema is a machine-specific value even when it is not the cwd.
_HOME_PATH = re.compile(r"(?:/home/|/Users/|[A-Za-z]:\\Users\\)[^\s\"']+")


def _per_run_values(prompt: Prompt) -> list[tuple[str, str]]:
    """Current dynamic-context values long enough to be recognisable (cwd, branch, ...)."""
    found = []
    for key, value in prompt.context.items():
        for piece in value.split("\n"):
            piece = piece.strip()
            if len(piece) >= 6:
                found.append((key, piece))
    return found


def lint(prompt: Prompt, rules: CacheRules) -> list[Finding]:
    """All findings for one prompt, head first, then tools, then marks."""
    per_run = _per_run_values(prompt)
    findings = [f for section in prompt.sections[:3] for f in _lint_head_section(section, per_run)]
    findings.extend(_lint_tools(prompt))
    findings.extend(_lint_marks(prompt, rules))
    return findings


def _lint_head_section(section: Section, per_run: list[tuple[str, str]]) -> Iterator[Finding]:
    """Volatile-looking text, home paths in tool schemas, and current per-run values in one head section."""
    severity: Severity = "warning" if section.stability == "static" else "info"
    in_tools = section.kind == "tools"
    for location, text in _texts(section):
        for code, what, pattern in VOLATILE_PATTERNS:
            match = pattern.search(text)
            if match:
                yield Finding(
                    code=code,
                    severity=severity,
                    section=section.label,
                    location=location,
                    message=f"{what} ({match.group(0)!r}) in the {section.stability} {section.label} "
                    "section; per-run data belongs in the dynamic context",
                )
        home = _HOME_PATH.search(text) if in_tools else None
        if home and not any(value in text for _, value in per_run):
            yield Finding(
                code="tool_schema_per_run_value",
                severity="warning",
                section=section.label,
                location=location,
                message=f"a home-directory path ({home.group(0)!r}) in a tool schema differs per machine",
            )
        for key, value in per_run:
            if value in text:
                yield Finding(
                    code="tool_schema_per_run_value" if in_tools else "head_per_run_value",
                    severity="error" if in_tools else "warning",
                    section=section.label,
                    location=location,
                    message=f"the current {key} ({value!r}) is embedded in {section.label}; it changes "
                    "between runs and workspaces, so the head will not be reused",
                )


def _lint_tools(prompt: Prompt) -> list[Finding]:
    findings: list[Finding] = []
    names = [t.name for t in prompt.tools]
    if names != sorted(names):
        findings.append(
            Finding(code="tool_order", severity="error", section="tools", message=f"tools are not sorted by name: {names}")
        )
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        findings.append(
            Finding(code="duplicate_tool", severity="error", section="tools", message=f"tool names used twice: {duplicates}")
        )
    expected = canonical_bytes([t.model_dump(mode="json") for t in prompt.tools]) if prompt.tools else b""
    if prompt.sections[0].data != expected and prompt.sections[0].data != canonical_bytes([]):
        findings.append(
            Finding(
                code="tools_not_canonical",
                severity="error",
                section="tools",
                message="the tools section bytes are not the canonical JSON of the tool list",
            )
        )
    return findings


def _lint_marks(prompt: Prompt, rules: CacheRules) -> Iterator[Finding]:
    marks = prompt.breakpoints
    if marks and not rules.places_marks:
        yield Finding(
            code="marks_ignored",
            severity="info",
            section=None,
            message=f"{rules.family} places no cache marks; the {len(marks)} planned mark(s) do nothing",
        )
    if rules.family == "anthropic" and len(marks) > rules.max_marks:
        yield Finding(
            code="too_many_marks",
            severity="error",
            section=None,
            message=f"{len(marks)} cache marks; the provider accepts at most {rules.max_marks}",
        )
    if rules.family == "openai_breakpoints" and len(marks) > rules.searched_marks:
        yield Finding(
            code="too_many_marks",
            severity="warning",
            section=None,
            message=f"{len(marks)} marks; only the latest {rules.searched_marks} are searched",
        )
    longest_so_far: int | None = None
    for n, mark in enumerate(sorted(marks, key=lambda m: (m.section, m.block_index))):
        where = f"breakpoint {n}"
        section = prompt.sections[mark.section] if mark.section < len(prompt.sections) else None
        label = section.label if section else None
        if mark.prefix_tokens < rules.min_cacheable_tokens:
            yield Finding(
                code="mark_below_min",
                severity="warning",
                section=label,
                location=where,
                message=f"mark at {mark.prefix_tokens} tokens is below the model's {rules.min_cacheable_tokens}-token "
                "minimum: it caches nothing",
            )
        if section is not None:
            j = mark.block_index - section.block_start
            if not (0 <= j < len(section.markable) and section.markable[j]):
                yield Finding(
                    code="unmarkable_block",
                    severity="error",
                    section=label,
                    location=where,
                    message="mark on a block that cannot carry one (thinking, empty text, or out of range)",
                )
        ttl = TTL_SECONDS[mark.ttl]
        if longest_so_far is not None and ttl > longest_so_far:
            yield Finding(
                code="ttl_order",
                severity="error",
                section=label,
                location=where,
                message=f"a {mark.ttl} mark after a shorter-lived one: longer TTLs must come first",
            )
        longest_so_far = ttl if longest_so_far is None else min(longest_so_far, ttl)
    if rules.places_marks and 0 < prompt.head_tokens < rules.min_cacheable_tokens:
        yield Finding(
            code="head_below_min",
            severity="info",
            section="docs",
            message=f"the static head is {prompt.head_tokens} tokens, below the {rules.min_cacheable_tokens}-token "
            "minimum: it cannot be cached on its own",
        )
