"""A priority queue: lowest priority value first."""

import heapq
from typing import Any


class PriorityQueue:
    def __init__(self) -> None:
        self._heap: list = []

    def push(self, item: Any, priority: int) -> None:
        heapq.heappush(self._heap, (priority, item))

    def pop(self) -> Any:
        if not self._heap:
            raise IndexError("pop from an empty PriorityQueue")
        return heapq.heappop(self._heap)[1]

    def peek(self) -> Any:
        if not self._heap:
            raise IndexError("peek at an empty PriorityQueue")
        return self._heap[0][1]

    def __len__(self) -> int:
        return len(self._heap)
