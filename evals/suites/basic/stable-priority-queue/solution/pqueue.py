"""A priority queue: lowest priority value first, first-in-first-out among equals."""

import heapq
import itertools
from typing import Any


class PriorityQueue:
    def __init__(self) -> None:
        # (priority, sequence, item): the sequence number breaks ties in push order, so items
        # themselves are never compared.
        self._heap: list[tuple[int, int, Any]] = []
        self._sequence = itertools.count()

    def push(self, item: Any, priority: int) -> None:
        heapq.heappush(self._heap, (priority, next(self._sequence), item))

    def pop(self) -> Any:
        if not self._heap:
            raise IndexError("pop from an empty PriorityQueue")
        return heapq.heappop(self._heap)[2]

    def peek(self) -> Any:
        if not self._heap:
            raise IndexError("peek at an empty PriorityQueue")
        return self._heap[0][2]

    def remove(self, item: Any) -> None:
        matches = [entry for entry in self._heap if entry[2] == item]
        if not matches:
            raise ValueError(f"{item!r} is not in the queue")
        earliest = min(matches, key=lambda entry: entry[1])
        self._heap = [entry for entry in self._heap if entry[1] != earliest[1]]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap)
