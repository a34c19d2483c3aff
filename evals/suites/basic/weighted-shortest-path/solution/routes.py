"""Routes on directed graphs: graph[a][b] is the weight of the edge a -> b."""

import heapq
from collections import deque

Graph = dict[str, dict[str, float]]


class NoRoute(Exception):
    pass


def fewest_hops(graph: Graph, start: str, goal: str) -> list[str]:
    """A path from start to goal with the fewest edges (weights ignored)."""
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = []
            while node is not None:
                path.append(node)
                node = previous[node]
            return path[::-1]
        for neighbour in sorted(graph.get(node, {})):
            if neighbour not in previous:
                previous[neighbour] = node
                queue.append(neighbour)
    raise NoRoute(f"no route from {start} to {goal}")


def _nodes(graph: Graph) -> set[str]:
    nodes = set(graph)
    for edges in graph.values():
        nodes.update(edges)
    return nodes


def shortest_path(graph: Graph, start: str, goal: str) -> tuple[float, list[str]]:
    """(total weight, path) of a least-weight route from start to goal (Dijkstra)."""
    for a, edges in graph.items():
        for b, weight in edges.items():
            if weight < 0:
                raise ValueError(f"negative weight on edge {a} -> {b}")
    if start == goal:
        return 0.0, [start]
    nodes = _nodes(graph)
    if start not in nodes or goal not in nodes:
        raise NoRoute(f"no route from {start} to {goal}")
    best: dict[str, float] = {start: 0.0}
    previous: dict[str, str] = {}
    heap: list[tuple[float, str]] = [(0.0, start)]
    done: set[str] = set()
    while heap:
        cost, node = heapq.heappop(heap)
        if node in done:
            continue
        if node == goal:
            path = [goal]
            while path[-1] != start:
                path.append(previous[path[-1]])
            return cost, path[::-1]
        done.add(node)
        for neighbour, weight in graph.get(node, {}).items():
            candidate = cost + weight
            if candidate < best.get(neighbour, float("inf")):
                best[neighbour] = candidate
                previous[neighbour] = node
                heapq.heappush(heap, (candidate, neighbour))
    raise NoRoute(f"no route from {start} to {goal}")
