"""How `hitrate lint` reports findings: one per value and place, at the higher severity."""

from __future__ import annotations

from hitrate.harness.commands.lint import one_per_value, report_lines
from hitrate.projection.caching import CacheRules
from hitrate.projection.lint import Finding

DATE_INFO = Finding(code="volatile_date", severity="info", section="docs", location="AGENTS.md line 3",
                    message="a date ('2026-12-03') in the session docs section; per-run data belongs in the dynamic context")
DATE_TODAY = Finding(code="head_per_run_value", severity="warning", section="docs", location="AGENTS.md line 3",
                     message="the current date ('2026-12-03') is embedded in docs; it changes between runs")
OTHER_LINE = DATE_INFO.model_copy(update={"location": "AGENTS.md line 9"})


def test_the_same_date_in_the_same_place_is_reported_once_at_the_higher_severity() -> None:
    assert one_per_value([DATE_INFO, DATE_TODAY, OTHER_LINE]) == [DATE_TODAY, OTHER_LINE]
    lines = report_lines([DATE_INFO, DATE_TODAY], CacheRules(family="anthropic"), 80)
    headers = [line for line in lines if not line.startswith(" ")]
    assert headers == ["warning head_per_run_value [docs AGENTS.md line 3]"]
    # Findings without a quoted value are never merged.
    marks = [Finding(code="too_many_marks", severity="warning", section=None, message="5 marks"),
             Finding(code="ttl_order", severity="warning", section=None, message="1h after 5m")]
    assert one_per_value(marks) == marks
