"""A pytest plugin that grading loads into the graded run: a tripwire for code that rewrites pytest.

The code under test runs in the same process as pytest, so it can patch `_pytest`'s report classes,
the runner or the JUnit writer and turn failures into passes. This plugin is loaded before any test
module is imported. It fingerprints pytest's own modules (every attribute, and every attribute of
their classes) and the set of registered plugins, and streams to the grader, as each happens, a
line per test report and, at the end, whatever changed (see `verdict_channel` for the grader's
side). The stream goes into a pipe the grader holds the other end of, never into a file: a file
can be rewritten after the guard wrote it (an `atexit` hook), a pipe's lines cannot be taken back.
Grading refuses a run whose stream is incomplete, carries lines after the end, names a change, or
disagrees with the JUnit report or pytest's exit status.

It cannot stop code that finds and patches the plugin itself; it turns the known, cheap attacks
into failed grades. It imports nothing from hitrate (it runs inside the graded interpreter).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import types
from typing import Any

VERDICT_FD_ENV = "HITRATE_GRADE_VERDICT_FD"
_WATCHED_PREFIXES = ("_pytest", "pytest", "pluggy")


def _watched_modules() -> dict[str, Any]:
    return {
        name: module
        for name, module in list(sys.modules.items())
        if module is not None and (name.split(".")[0] in _WATCHED_PREFIXES)
    }


def _is_code(value: Any) -> bool:
    # Only behaviour is fingerprinted (functions, classes, descriptors); pytest keeps run state in
    # plain attributes (e.g. the debugger's current config) that legitimately change.
    return isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, classmethod, staticmethod,
                              property, types.MethodType, functools.partial))  # fmt: skip


def _fingerprint() -> dict[str, int]:
    prints: dict[str, int] = {}
    for name, module in _watched_modules().items():
        prints[name] = id(module)
        for attr, value in list(vars(module).items()):
            if not _is_code(value):
                continue
            prints[f"{name}.{attr}"] = id(value)
            if isinstance(value, type) and value.__module__ == name:
                for member, inner in list(vars(value).items()):
                    if _is_code(inner):
                        prints[f"{name}.{attr}.{member}"] = id(inner)
    return prints


class GradeGuard:
    def __init__(self, verdict_fd: int | None) -> None:
        self.fd = verdict_fd
        self.before: dict[str, int] = {}
        self.plugins_before: set[int] = set()

    def _send(self, event: dict[str, Any]) -> None:
        if self.fd is None:
            return
        data = (json.dumps(event) + "\n").encode("utf-8")
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            self.fd = None  # the grader sees an incomplete stream

    def pytest_configure(self, config: Any) -> None:
        self.before = _fingerprint()
        self.config = config
        self._send({"event": "start"})

    def pytest_collection_finish(self, session: Any) -> None:
        # Conftests are registered during collection; the set after it is the legitimate one.
        self.plugins_before = {id(p) for p in session.config.pluginmanager.get_plugins()}

    def pytest_collectreport(self, report: Any) -> None:
        if report.outcome == "failed":
            self._send({"event": "collect", "nodeid": report.nodeid})

    def pytest_runtest_logreport(self, report: Any) -> None:
        self._send({"event": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome})

    def pytest_unconfigure(self, config: Any) -> None:
        after = _fingerprint()
        changed = sorted(
            key for key, value in self.before.items() if key.count(".") >= 1 and after.get(key, value) != value
        )
        changed += sorted(f"{key} (removed)" for key in self.before if key not in after and "." in key)
        plugins = [
            repr(p)[:200]
            for p in config.pluginmanager.get_plugins()
            if self.plugins_before and id(p) not in self.plugins_before
        ]
        self._send({"event": "end", "changed": changed[:50], "plugins_added": plugins[:20]})
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def pytest_configure(config: Any) -> None:
    # The variables that brought the guard in leave the environment before any test code runs:
    # the code under test sees neither the guard's folder nor which descriptor carries the verdict.
    os.environ.pop("PYTHONPATH", None)
    number = os.environ.pop(VERDICT_FD_ENV, None)
    fd = int(number) if number and number.isdigit() else None
    if fd is not None:
        try:
            os.set_inheritable(fd, False)  # no process the tests start gets it
        except OSError:
            fd = None
    config.pluginmanager.register(GradeGuard(fd), "hitrate-grade-guard")
