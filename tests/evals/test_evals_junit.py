"""JUnit XML parsing and the mapping from pytest node ids to report entries."""

from __future__ import annotations

import pytest

from hitrate.evals.junit import TestOutcome, junit_key, match_outcomes, parse_junit

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="6">
  <testcase classname="tests.test_a" name="test_pass" time="0.001"/>
  <testcase classname="tests.test_a" name="test_fail"><failure message="assert 1 == 2"/></testcase>
  <testcase classname="tests.test_a.TestGroup" name="test_skip"><skipped message="why"/></testcase>
  <testcase classname="tests.test_a" name="test_teardown"/>
  <testcase classname="tests.test_a" name="test_teardown"><error message="teardown failed"/></testcase>
  <testcase classname="tests.sub.test_b" name="test_p[1-x::y]"/>
  <testcase classname="tests.sub.test_b" name="test_p[2]"><failure message="no"/></testcase>
  <testcase classname="" name="tests.test_broken"><error message="collection failure"/></testcase>
</testsuite></testsuites>
"""


def test_junit_key_mirrors_pytest_mangling() -> None:
    assert junit_key("tests/test_a.py::test_x") == ("tests.test_a", "test_x")
    assert junit_key("tests/sub/test_b.py::TestG::test_y") == ("tests.sub.test_b.TestG", "test_y")
    assert junit_key("tests/test_a.py::test_p[a/b::c.py]") == ("tests.test_a", "test_p[a/b::c.py]")


def test_parse_outcomes_and_worst_duplicate_wins() -> None:
    parsed = parse_junit(REPORT)
    assert parsed[("tests.test_a", "test_pass")] is TestOutcome.passed
    assert parsed[("tests.test_a", "test_fail")] is TestOutcome.failed
    assert parsed[("tests.test_a.TestGroup", "test_skip")] is TestOutcome.skipped
    assert parsed[("tests.test_a", "test_teardown")] is TestOutcome.error
    assert parsed[("", "tests.test_broken")] is TestOutcome.error


def test_match_outcomes() -> None:
    listed, others = match_outcomes(
        [
            "tests/test_a.py::test_pass",
            "tests/test_a.py::TestGroup::test_skip",
            "tests/sub/test_b.py::test_p",
            "tests/test_a.py::test_absent",
            "tests/sub/test_b.py::test_p[9]",
        ],
        parse_junit(REPORT),
    )
    assert listed == {
        "tests/test_a.py::test_pass": TestOutcome.passed,
        "tests/test_a.py::TestGroup::test_skip": TestOutcome.skipped,
        "tests/sub/test_b.py::test_p": TestOutcome.failed,  # worst of its parametrized cases
        "tests/test_a.py::test_absent": TestOutcome.missing,
        "tests/sub/test_b.py::test_p[9]": TestOutcome.missing,
    }
    assert others == {
        "tests.test_a::test_fail": TestOutcome.failed,
        "tests.test_a::test_teardown": TestOutcome.error,
        "tests.test_broken": TestOutcome.error,
    }


@pytest.mark.parametrize("text", ["", "<not-closed", "<html><body/></html>"])
def test_unparseable_reports_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_junit(text)
