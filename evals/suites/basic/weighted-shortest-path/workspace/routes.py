"""Routes on directed graphs: graph[a][b] is the weight of the edge a -> b."""

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
