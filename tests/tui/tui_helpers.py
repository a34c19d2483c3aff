"""Shared helpers of the TUI tests (a module with a unique name: test folders share sys.path)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Callable

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
SPEC = "anthropic/claude-sonnet-4-6"


class FrozenClock:
    """Wall-clock stand-in: stays put unless a test moves it."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def fixed_context() -> dict[str, str]:
    """Dynamic context without a clock or a temp path, so prompts are the same bytes every run."""
    return {"date": "2026-05-01", "workspace": "demo-repo"}


async def wait_until(pilot, predicate: Callable[[], bool], what: str, tries: int = 200) -> None:
    """Let the app work until `predicate` holds; fail naming `what` if it never does."""
    for _ in range(tries):
        if predicate():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for: {what}")


async def submit(pilot, text: str) -> None:
    prompt = pilot.app.query_one("#prompt")
    prompt.value = text
    await pilot.press("enter")
