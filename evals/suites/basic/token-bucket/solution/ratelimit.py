"""Rate limiters."""

import time
from typing import Callable


class FixedWindowLimiter:
    """At most `limit` calls per window of `window_s` seconds (windows start at time 0)."""

    def __init__(self, limit: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1 or window_s <= 0:
            raise ValueError("limit must be >= 1 and window_s > 0")
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._window = None
        self._count = 0

    def allow(self) -> bool:
        window = int(self._clock() // self.window_s)
        if window != self._window:
            self._window, self._count = window, 0
        if self._count < self.limit:
            self._count += 1
            return True
        return False


class TokenBucket:
    """Tokens refill continuously at `rate_per_s` up to `capacity`; each request spends some."""

    def __init__(self, rate_per_s: float, capacity: float, clock: Callable[[], float] = time.monotonic) -> None:
        if rate_per_s <= 0 or capacity <= 0:
            raise ValueError("rate_per_s and capacity must be positive")
        self.rate_per_s = rate_per_s
        self.capacity = capacity
        self._clock = clock
        self._tokens = float(capacity)
        self._updated = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._updated) * self.rate_per_s)
        self._updated = now

    def _check(self, cost: float) -> None:
        if cost <= 0 or cost > self.capacity:
            raise ValueError(f"cost must be in (0, {self.capacity}], got {cost}")

    @property
    def tokens(self) -> float:
        self._refill()
        return self._tokens

    def allow(self, cost: float = 1.0) -> bool:
        self._check(cost)
        self._refill()
        if self._tokens >= cost:
            self._tokens -= cost
            return True
        return False

    def wait_time(self, cost: float = 1.0) -> float:
        self._check(cost)
        self._refill()
        return max(0.0, (cost - self._tokens) / self.rate_per_s)
