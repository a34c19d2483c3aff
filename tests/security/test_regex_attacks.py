"""Catastrophic patterns: a regex or glob that makes a backtracking engine run for hours must come
back in seconds, from the python grep engine (no ripgrep) and from glob / grep's glob filter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hitrate.tools import ToolContext
from hitrate.tools import grep as grep_module
from hitrate.tools.grep import GrepTool
from hitrate.tools.registry import ToolRegistry

pytestmark = pytest.mark.timeout(60)


def _python_grep() -> ToolRegistry:
    return ToolRegistry([GrepTool(ripgrep=None)])


def test_nested_quantifiers_run_in_linear_time(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "f.txt").write_text("x" * 5000 + "\n")
    began = time.monotonic()
    result = _python_grep().execute("grep", {"pattern": "(x+x+)+y"}, ctx)
    assert time.monotonic() - began < 5
    assert result.content.startswith("no matches")


def test_a_backtracking_pattern_is_stopped_at_its_budget(workspace: Path, ctx: ToolContext, monkeypatch) -> None:
    # Look-behind needs the backtracking fallback; its time is bounded instead.
    monkeypatch.setattr(grep_module, "REGEX_BUDGET_S", 0.5)
    (workspace / "f.txt").write_text("a" * 40 + "\n")
    began = time.monotonic()
    result = _python_grep().execute("grep", {"pattern": "(?<=a)((a|aa)+)+b"}, ctx)
    assert time.monotonic() - began < 10
    assert result.is_error and "simplify the pattern" in result.content


def test_look_around_still_works_in_the_fallback(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "f.txt").write_text("needle in\nneedle out\n")
    result = _python_grep().execute("grep", {"pattern": "needle(?= in)"}, ctx)
    assert result.content == "f.txt:1:needle in"


def test_a_glob_with_many_stars_is_linear(registry, workspace: Path, ctx: ToolContext) -> None:
    (workspace / ("a" * 200)).write_text("")
    began = time.monotonic()
    result = registry.execute("glob", {"pattern": "*a*a*a*a*a*a*a*a*a*a*a*a*b"}, ctx)
    filtered = _python_grep().execute("grep", {"pattern": "x", "glob": "*a*a*a*a*a*a*a*a*a*a*a*a*b"}, ctx)
    assert time.monotonic() - began < 5
    assert not result.is_error and not filtered.is_error
