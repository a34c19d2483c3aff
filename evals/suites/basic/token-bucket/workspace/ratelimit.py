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
