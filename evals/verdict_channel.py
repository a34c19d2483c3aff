"""The grader's end of the grading guard's verdict: a pipe, not a file.

A verdict written to a file can be rewritten after the guard wrote it: code under test registers
an `atexit` hook that, once pytest has written `junit.xml` and the guard its verdict, rewrites both
to "all passed" and calls `os._exit(0)`. So the guard (`grade_guard`) streams what it sees, one
JSON line per event, into the write end of a pipe the grader created and handed to pytest alone;
the grader holds the read end, drains it while the tests run, and reads:

- `start` first, when pytest configures, before any test module is imported;
- a `report` per test phase (setup, call, teardown) as pytest delivers it, and a `collect` per
  collection failure: written as they happen, so a later hook cannot take them back;
- `end` last, with what changed in pytest's code, after which the guard closes its end.

Anything else is tampering: no `start` or `end`, a second one, lines after `end`, lines that are
not the guard's. Lines written by the code under test can only add outcomes, and outcomes only get
worse (a test seen failing stays failed), so forged lines cannot turn a failure into a pass.
"""

from __future__ import annotations

import json
import os
import select
import threading
from dataclasses import dataclass, field

# More than any honest run writes (a line per test phase); past it the channel is being flooded.
MAX_CHANNEL_BYTES = 16 * 1024 * 1024


class VerdictChannel:
    """A pipe whose write end goes to the graded pytest (`write_fd`, via `pass_fds`); its read end
    is drained by a thread of the grader while the tests run."""

    def __init__(self, max_bytes: int = MAX_CHANNEL_BYTES) -> None:
        self._read, self.write_fd = os.pipe()  # both non-inheritable; pass_fds hands over the write end
        self._max_bytes = max_bytes
        self._chunks: list[bytes] = []
        self._size = 0
        self.overflowed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="grade-verdict", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while True:
            ready, _, _ = select.select([self._read], [], [], 0.1)
            if not ready:
                if self._stop.is_set():
                    return
                continue
            chunk = os.read(self._read, 65536)
            if not chunk:
                return
            if self._size + len(chunk) > self._max_bytes:
                self.overflowed = True  # keep draining, so the writer never blocks, but keep nothing more
                continue
            self._chunks.append(chunk)
            self._size += len(chunk)

    def close_writer(self) -> None:
        """Close the grader's own copy of the write end (after the child has started or ended)."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def collect(self, grace_s: float = 2.0) -> bytes:
        """Everything the channel carried. Call once the graded process has ended; a descendant that
        still holds the write end after `grace_s` is not waited for."""
        self.close_writer()
        self._thread.join(grace_s)
        self._stop.set()
        self._thread.join()
        os.close(self._read)
        return b"".join(self._chunks)


@dataclass
class ChannelVerdict:
    """What the guard reported, and what about the channel itself is wrong (never empty when the
    channel cannot be trusted)."""

    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> passed / failed / error / skipped
    collect_errors: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    plugins_added: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def saw_failure(self) -> bool:
        return bool(self.collect_errors) or any(o in ("failed", "error") for o in self.outcomes.values())


def _add_report(outcomes: dict[str, str], nodeid: str, when: str, outcome: str) -> None:
    # The call phase decides a test; a failed setup or teardown makes it an error. Never better
    # than before: a failure stays, whatever comes after it.
    if when != "call" and outcome != "failed" and outcome != "skipped":
        return
    new = "error" if (when != "call" and outcome == "failed") else outcome
    previous = outcomes.get(nodeid)
    if previous is None or previous == "passed" or (previous == "skipped" and new in ("failed", "error")):
        outcomes[nodeid] = new


_OUTCOMES = {"passed", "failed", "skipped"}
_PHASES = {"setup", "call", "teardown"}


def read_verdict(data: bytes, overflowed: bool = False) -> ChannelVerdict:
    """The guard's stream parsed, every irregularity named in `problems`."""
    verdict = ChannelVerdict()
    problems = verdict.problems
    if overflowed:
        problems.append(f"the verdict channel carried more than {MAX_CHANNEL_BYTES:,} bytes (flooded)")
    started = ended = False
    stray = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            event = json.loads(raw)
            kind = event["event"]
        except (ValueError, TypeError, KeyError):
            stray += 1
            continue
        if ended:
            problems.append(f"the verdict channel carried a {kind!r} line after the guard's end (written by the code under test)")
            continue
        if kind == "start":
            if started:
                problems.append("the verdict channel carried a second start")
            started = True
        elif not started:
            problems.append(f"the verdict channel carried a {kind!r} line before the guard started")
        elif kind == "report" and event.get("when") in _PHASES and event.get("outcome") in _OUTCOMES:
            _add_report(verdict.outcomes, str(event.get("nodeid")), event["when"], event["outcome"])
        elif kind == "collect":
            verdict.collect_errors.append(str(event.get("nodeid")))
        elif kind == "end":
            ended = True
            verdict.changed = [str(c) for c in event.get("changed", [])][:50]
            verdict.plugins_added = [str(p) for p in event.get("plugins_added", [])][:20]
        else:
            stray += 1
    if stray:
        problems.append(f"the verdict channel carried {stray} line(s) that are not the guard's")
    if not started or not ended:
        problems.append("the grading guard's verdict is incomplete (the test process ended early or was tampered with)")
    return verdict
