"""Per-test outcomes from pytest's JUnit XML, matched to pytest node ids."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from enum import StrEnum


class TestOutcome(StrEnum):
    passed = "passed"
    failed = "failed"
    error = "error"
    """An error outside the test body: setup/teardown, or the test module failed to import."""
    skipped = "skipped"
    missing = "missing"
    """The test did not appear in the report (not collected, or the run never finished)."""

    __test__ = False  # not a pytest test class despite the name


# When one key occurs more than once (a teardown error reported apart from its call), the worse
# outcome wins, so a test never counts as passed while part of it broke.
_SEVERITY = {TestOutcome.passed: 0, TestOutcome.skipped: 1, TestOutcome.failed: 2, TestOutcome.error: 3}

JunitKey = tuple[str, str]


def junit_key(node_id: str) -> JunitKey:
    """The (classname, name) pair pytest writes for a node id (mirrors pytest's own mangling).

    `tests/test_a.py::TestX::test_y[p::q]` -> ("tests.test_a.TestX", "test_y[p::q]").
    """
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def display_id(key: JunitKey) -> str:
    """A readable id for a report entry that matched no listed node id."""
    classname, name = key
    return f"{classname}::{name}" if classname else name


def parse_junit(xml_text: str) -> dict[JunitKey, TestOutcome]:
    """Outcome of every testcase in a pytest JUnit XML report.

    Raises ValueError when the text is not a JUnit report.
    """
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"JUnit XML does not parse: {exc}") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"not a JUnit report: root element is <{root.tag}>")
    outcomes: dict[JunitKey, TestOutcome] = {}
    for case in root.iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        outcome = _case_outcome(case)
        previous = outcomes.get(key)
        if previous is None or _SEVERITY[outcome] > _SEVERITY[previous]:
            outcomes[key] = outcome
    return outcomes


def _case_outcome(case: ET.Element) -> TestOutcome:
    tags = {child.tag for child in case}
    if "error" in tags:
        return TestOutcome.error
    if "failure" in tags:
        return TestOutcome.failed
    if "skipped" in tags:
        return TestOutcome.skipped
    return TestOutcome.passed


def match_outcomes(
    node_ids: list[str], reported: dict[JunitKey, TestOutcome]
) -> tuple[dict[str, TestOutcome], dict[str, TestOutcome]]:
    """Split a report into the listed node ids' outcomes and the outcomes of everything else.

    A listed id without parameters (`tests/t.py::test_x`) also stands for all its parametrized
    cases (`test_x[1]`, `test_x[2]`, ...): its outcome is the worst of theirs. A listed id absent
    from the report is `missing`. Entries that match no listed id (tests the task does not list,
    collection errors) come back keyed by a readable id.
    """
    listed: dict[str, TestOutcome] = {}
    used: set[JunitKey] = set()
    for node_id in node_ids:
        key = junit_key(node_id)
        if key in reported:
            matched = [key]
        elif "[" not in key[1]:
            matched = [k for k in reported if k[0] == key[0] and k[1].startswith(key[1] + "[")]
        else:
            matched = []
        used.update(matched)
        outcomes = [reported[k] for k in matched]
        listed[node_id] = max(outcomes, key=_SEVERITY.__getitem__) if outcomes else TestOutcome.missing
    others = {display_id(key): outcome for key, outcome in reported.items() if key not in used}
    return listed, others
