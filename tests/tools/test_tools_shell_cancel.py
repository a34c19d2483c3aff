"""shell: a cancel event set by another thread stops a running command at once, group and all."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest


def _wait_for(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


@pytest.mark.timeout(30)
def test_cancel_stops_a_long_command_and_its_children(registry, ctx, workspace: Path, gone_within) -> None:
    cancel = threading.Event()
    ctx = dataclasses.replace(ctx, cancel=cancel)
    command = "(trap '' TERM; exec sleep 64.25) & echo $! > child.pid; echo started; sleep 60"
    # Cancel as soon as the command is running, from another thread (the UI's Esc).
    threading.Thread(target=lambda: (_wait_for(workspace / "child.pid"), cancel.set()), daemon=True).start()
    began = time.monotonic()
    result = registry.execute("shell", {"command": command, "timeout_s": 120}, ctx)
    took = time.monotonic() - began
    assert took < 10, f"the cancelled command ran {took:.1f}s"
    assert result.is_error and result.metadata["cancelled"] is True and result.metadata["timed_out"] is False
    assert result.content == "started\n[cancelled by the user: the command and every process it started were stopped]"
    _wait_for(workspace / "child.pid")
    assert gone_within("64.25"), "the child outlived the cancelled command"


def test_an_unset_cancel_event_changes_nothing(registry, ctx) -> None:
    ctx = dataclasses.replace(ctx, cancel=threading.Event())
    result = registry.execute("shell", {"command": "echo fine"}, ctx)
    assert result.content == "fine\n[exit code 0]" and result.metadata["cancelled"] is False
    assert not ctx.cancelled
