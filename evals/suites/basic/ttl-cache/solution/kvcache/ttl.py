"""A key-value cache whose entries expire a fixed time after they were set."""

import time
from typing import Any, Callable, Hashable


class TTLCache:
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        self.ttl_s = ttl_s
        self._clock = clock
        self._data: dict = {}  # key -> (set_at, value)

    def _expired(self, set_at: float, now: float) -> bool:
        return now - set_at >= self.ttl_s

    def set(self, key: Hashable, value: Any) -> None:
        self._data[key] = (self._clock(), value)

    def get(self, key: Hashable, default: Any = None) -> Any:
        entry = self._data.get(key)
        if entry is None:
            return default
        if self._expired(entry[0], self._clock()):
            del self._data[key]
            return default
        return entry[1]

    def purge(self) -> int:
        now = self._clock()
        expired = [k for k, (set_at, _) in self._data.items() if self._expired(set_at, now)]
        for key in expired:
            del self._data[key]
        return len(expired)

    def __len__(self) -> int:
        now = self._clock()
        return sum(not self._expired(set_at, now) for set_at, _ in self._data.values())
