"""How `hitrate lint` reports: what it checked, then each finding with the edit that fixes it,
wrapped between words to the terminal's width."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hitrate.projection.caching import CacheRules
    from hitrate.projection.lint import Finding
    from hitrate.projection.prompt import Prompt

_QUOTED = re.compile(r"\('(?P<value>[^']*)'\)")
_VOLATILE_WHAT = {"volatile_uuid": "UUID", "volatile_date": "date", "volatile_time": "clock time"}


def _where(finding: Finding) -> str:
    return " ".join(part for part in (finding.section or "prompt", finding.location) if part)


def _doc_and_line(finding: Finding) -> tuple[str | None, str | None]:
    """("AGENTS.md", "line 3") from a docs finding's location "AGENTS.md line 3"."""
    match = re.fullmatch(r"(?P<file>.+?) (?P<line>line \d+)", finding.location or "")
    if match:
        return match.group("file"), match.group("line")
    return None, finding.location


def advice(finding: Finding, rules: CacheRules) -> str:
    """The concrete edit that removes `finding`."""
    code = finding.code
    quoted = _QUOTED.search(finding.message)
    value = f"'{quoted.group('value')}'" if quoted else "the value"
    if code.startswith("volatile_") or code == "head_per_run_value":
        what = _VOLATILE_WHAT.get(code, "value")
        if finding.section == "docs":
            doc, line = _doc_and_line(finding)
            target = f"{doc} {line}" if doc else _where(finding)
            return (f"edit {target}: delete the {what} {value} or replace it with a fixed text (hitrate adds "
                    "the date, cwd and git status to each turn by itself).")  # fmt: skip
        if finding.section == "system":
            return (f"edit the system prompt template at {finding.location or 'the line shown'}: take out {value}; "
                    "a per-run value belongs in the dynamic context of the newest turn.")  # fmt: skip
        return f"take {value} out of {_where(finding)}: per-run values belong in the dynamic context."
    if code == "tool_schema_per_run_value":
        return (f"edit the tool schema at {finding.location or 'the path shown'}: replace {value} with a fixed "
                "description; a value that changes per run rewrites the whole cached head.")  # fmt: skip
    if code == "tool_order":
        return "register the tools sorted by name (the projection sorts its own tools; a custom registry must too)."
    if code == "duplicate_tool":
        return "rename or remove one of the tools that share a name."
    if code == "tools_not_canonical":
        return "build the tools section with hitrate.projection.canonical (sorted keys, fixed separators)."
    if code == "too_many_marks":
        return f"keep at most {rules.max_marks} cache marks: drop the intermediate marks, keep the head's and the newest turn's."
    if code == "mark_below_min":
        return (f"move the mark to a prefix of at least {rules.min_cacheable_tokens:,} tokens, or drop it: "
                "below the minimum the provider caches nothing there.")  # fmt: skip
    if code == "head_below_min":
        return (f"nothing to edit unless the head should cache on its own: it needs {rules.min_cacheable_tokens:,} "
                "tokens (add project docs such as AGENTS.md); later turns cache once the prompt is long enough.")  # fmt: skip
    if code == "ttl_order":
        return "give the earlier marks the longer TTL (1h marks before 5m marks)."
    if code == "marks_ignored":
        return "nothing to edit: this provider caches by prefix without marks."
    if code == "unmarkable_block":
        return "move the mark to the nearest text or tool block."
    return finding.message


def checked_line(prompt: Prompt, rules: CacheRules, docs: Sequence[str], tool_count: int) -> str:
    """What lint looked at, so "no findings" says something."""
    doc_text = ", ".join(docs) if docs else "(no project docs found: AGENTS.md, CLAUDE.md, README…)"
    minimum = f"{rules.min_cacheable_tokens:,}-token minimum" if rules.min_cacheable_tokens else "no minimum"
    marks = f"at most {rules.max_marks} marks" if rules.places_marks else "no marks"
    return (f"checked: {tool_count} tool schemas, the system prompt and {doc_text} for volatile text (dates, "
            f"times, UUIDs, per-run values); tool order and canonical JSON; {len(prompt.breakpoints)} cache "
            f"mark(s) against {rules.family}'s rules ({minimum}, {marks}).")  # fmt: skip


_SEVERITY = {"error": 0, "warning": 1, "info": 2}


def one_per_value(findings: Sequence[Finding]) -> list[Finding]:
    """The findings with one per quoted value and place: the date in AGENTS.md line 3 is a
    volatile date (info) and, being today's, a per-run value (warning); the user has one thing to
    edit, so it is reported once, at the higher severity."""
    kept: dict[tuple[str | None, str | None, str], Finding] = {}
    order: list[tuple[str | None, str | None, str]] = []
    for finding in findings:
        quoted = _QUOTED.search(finding.message)
        key = (finding.section, finding.location, quoted.group("value") if quoted else f"#{len(order)}")
        if key not in kept:
            order.append(key)
            kept[key] = finding
        elif _SEVERITY.get(finding.severity, 3) < _SEVERITY.get(kept[key].severity, 3):
            kept[key] = finding
    return [kept[key] for key in order]


def report_lines(findings: Sequence[Finding], rules: CacheRules, width: int) -> list[str]:
    """Each finding (one per value and place): severity, code and where; the message; the fix.
    Wrapped between words."""
    lines: list[str] = []
    for f in one_per_value(findings):
        lines.append(f"{f.severity} {f.code} [{_where(f)}]")
        lines += textwrap.wrap(f.message, width, initial_indent="  ", subsequent_indent="  ", break_long_words=False,
                               break_on_hyphens=False)  # fmt: skip
        lines += textwrap.wrap(advice(f, rules), width, initial_indent="  fix: ", subsequent_indent="       ",
                               break_long_words=False, break_on_hyphens=False)  # fmt: skip
    return lines


def wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
