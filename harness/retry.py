"""Retrying model calls: exponential backoff with full jitter, honouring the server's retry-after.

The SDKs are created with `max_retries=0` so that every attempt is visible here (and can be shown
and recorded). Retried: 429 rate limits, 5xx, Anthropic's 529 overloaded (also when it arrives as an
error event inside a stream), timeouts and dropped connections. Not retried: every other 4xx (a bad
request, a bad key, an unknown model): repeating it cannot succeed, so it fails at once with the
server's message.
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from hitrate.harness.wire.types import CallError

T = TypeVar("T")

Sleep = Callable[[float], None]
OnRetry = Callable[[CallError, int, float], None]
"""Called before each wait with (the error, the attempt that failed (1-based), seconds to wait)."""


class RetryPolicy(BaseModel):
    """How often and how long to retry a failed call."""

    model_config = ConfigDict(frozen=True)

    max_attempts: int = Field(default=6, ge=1)
    """Attempts in all, the first included."""
    base_delay_s: float = Field(default=1.0, ge=0)
    """Backoff unit: attempt n waits a random time in [0, base * 2**(n-1)] (full jitter)."""
    max_delay_s: float = Field(default=60.0, ge=0)
    """Cap on any computed backoff."""
    max_retry_after_s: float = Field(default=120.0, ge=0)
    """A server asking for a longer wait than this is not waited for: the call fails instead."""


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**(attempt-1))]. Spreads retries of many clients
    hit by the same overload instead of having them return in lockstep."""
    ceiling = min(policy.max_delay_s, policy.base_delay_s * (2 ** (attempt - 1)))
    return rng.uniform(0.0, ceiling)


def call_with_retries(
    attempt_fn: Callable[[int], T],
    policy: RetryPolicy,
    *,
    sleep: Sleep = time.sleep,
    rng: random.Random | None = None,
    on_retry: OnRetry | None = None,
    deadline: float | None = None,
) -> T:
    """Run `attempt_fn(attempt_number)` until it succeeds, fails for good, or attempts run out.
    With `deadline` (a `time.monotonic()` value: the run's wall-time limit), no retry starts, and
    no wait runs, past it; the error then has `out_of_time` set.

    Raises the last CallError with `attempts` set to how many were made.
    """
    rng = rng or random.Random()
    attempt = 1
    while True:
        try:
            return attempt_fn(attempt)
        except CallError as error:
            error.attempts = attempt
            if not error.retryable or attempt >= policy.max_attempts:
                raise
            if deadline is not None and time.monotonic() >= deadline:
                error.out_of_time = True
                raise
            if error.retry_after_s is not None:
                if error.retry_after_s > policy.max_retry_after_s:
                    error.message += (
                        f" (server asked to retry after {error.retry_after_s:.0f}s, more than the "
                        f"{policy.max_retry_after_s:.0f}s this policy waits)"
                    )
                    raise
                delay = error.retry_after_s
            else:
                delay = backoff_delay(policy, attempt, rng)
            if deadline is not None and time.monotonic() + delay >= deadline:
                error.message += " (no time left to retry under the run's wall-time limit)"
                error.out_of_time = True
                raise
            if on_retry is not None:
                on_retry(error, attempt, delay)
            sleep(delay)
            attempt += 1
