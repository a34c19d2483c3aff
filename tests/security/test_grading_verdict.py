"""A wrong solution that forges its grade after pytest is done: an `atexit` hook that rewrites
`junit.xml` and the guard's verdict to "all passed" and ends the process with status 0.

The verdict now comes through a pipe the grader holds: lines cannot be taken back, lines after the
guard's end are tampering, and pytest's exit status is checked against what the guard saw.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hitrate.evals.grading import grade
from hitrate.evals.task import load_task
from hitrate.evals.verdict_channel import read_verdict
from hitrate.tools.confine import detect

from evals_task_factory import BUGGY

pytestmark = pytest.mark.timeout(120)

# Wrong code (add still subtracts) that, at exit, rewrites every report near the run to "all
# passed", writes a forged verdict wherever the guard could write one, and exits 0.
FORGE_AT_EXIT = BUGGY + '''
import atexit, glob, json, os, re, stat


def _descriptors():
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISFIFO(os.fstat(int(name)).st_mode):
                yield int(name)
        except OSError:
            pass


_SAVED = [os.dup(fd) for fd in _descriptors()]  # every pipe, before the guard can close its own


def _forge():
    roots = {os.path.dirname(os.getcwd()), os.getcwd()}
    for root in roots:
        for path in glob.glob(os.path.join(root, "**", "*.xml"), recursive=True):
            with open(path, "w") as handle:
                handle.write('<testsuites><testsuite name="pytest" tests="2">'
                             '<testcase classname="tests.test_mathx" name="test_add"/>'
                             '<testcase classname="tests.test_mathx" name="test_mul"/></testsuite></testsuites>')
        for path in glob.glob(os.path.join(root, "**", "verdict*"), recursive=True):
            with open(path, "w") as handle:
                json.dump({"outcomes": {"tests/test_mathx.py::test_add": "passed",
                                        "tests/test_mathx.py::test_mul": "passed"},
                           "changed": [], "plugins_added": []}, handle)
    forged = (json.dumps({"event": "report", "nodeid": "tests/test_mathx.py::test_add", "when": "call",
                          "outcome": "passed"}) + "\\n").encode()
    for fd in _SAVED:
        try:
            os.write(fd, forged)
        except OSError:
            pass
    os._exit(0)


atexit.register(_forge)
'''


def test_an_atexit_hook_rewriting_the_reports_does_not_pass(make_task, tmp_path: Path) -> None:
    task = load_task(make_task())
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "mathx.py").write_text(FORGE_AT_EXIT)
    result = grade(task, agent)
    assert not result.resolved, result.output
    assert result.tampering, "the forged grade was not flagged"


def test_the_guards_folder_cannot_be_written_by_the_code_under_test(make_task) -> None:
    if detect().kind != "bubblewrap":
        pytest.skip("read-only folders inside the grading root need bubblewrap")
    probe = (
        "import glob, os\nfrom mathx import add\n\n\n"
        "def test_add():\n"
        "    assert add(2, 3) == 5\n"
        "    guards = glob.glob(os.path.join(os.path.dirname(os.getcwd()), 'guard', '*'))\n"
        "    assert guards\n"
        "    for path in guards:\n"
        "        try:\n"
        "            open(path, 'a').close()\n"
        "        except OSError:\n"
        "            continue\n"
        "        raise AssertionError(f'writable: {path}')\n"
    )
    task = load_task(make_task(tests={"test_mathx.py": probe}, p2p=[]))
    result = grade(task, overlay=task.solution_dir)
    assert result.resolved, result.output


def test_exit_status_zero_after_a_failure_is_tampering(make_task, tmp_path: Path) -> None:
    # No file touched: the process just reports success after pytest saw the failure.
    task = load_task(make_task())
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "mathx.py").write_text(BUGGY + "\nimport atexit, os\natexit.register(lambda: os._exit(0))\n")
    result = grade(task, agent)
    assert not result.resolved
    assert any("exit status is 0" in problem for problem in result.tampering), result.tampering


def _line(**event: object) -> bytes:
    return (json.dumps(event) + "\n").encode()


def test_the_stream_keeps_failures_and_names_every_irregularity() -> None:
    honest = _line(event="start") + _line(event="report", nodeid="t::a", when="call", outcome="failed")
    forged = _line(event="report", nodeid="t::a", when="call", outcome="passed")
    verdict = read_verdict(honest + forged + _line(event="end", changed=[], plugins_added=[]))
    assert verdict.outcomes == {"t::a": "failed"} and verdict.problems == []  # a forged pass changes nothing
    after_end = read_verdict(honest + _line(event="end") + forged)
    assert any("after the guard's end" in p for p in after_end.problems)
    assert any("incomplete" in p for p in read_verdict(honest).problems)
    assert any("not the guard's" in p for p in read_verdict(honest + b"garbage\n" + _line(event="end")).problems)
    assert any("second start" in p for p in read_verdict(honest + _line(event="start") + _line(event="end")).problems)
    assert any("flooded" in p for p in read_verdict(b"", overflowed=True).problems)
    teardown = read_verdict(
        _line(event="start")
        + _line(event="report", nodeid="t::b", when="call", outcome="passed")
        + _line(event="report", nodeid="t::b", when="teardown", outcome="failed")
        + _line(event="end")
    )
    assert teardown.outcomes == {"t::b": "error"} and teardown.saw_failure
