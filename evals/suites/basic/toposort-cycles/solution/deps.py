"""Order nodes so that each comes after the nodes it depends on."""

import heapq


class CycleError(Exception):
    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__("dependency cycle: " + " -> ".join(cycle + cycle[:1]))


def topo_sort(graph: dict[str, list[str]]) -> list[str]:
    """Every node after its dependencies; ready nodes in alphabetical order."""
    deps: dict[str, set[str]] = {}
    for node, node_deps in graph.items():
        deps.setdefault(node, set()).update(node_deps)
        for dep in node_deps:
            deps.setdefault(dep, set())
    dependents: dict[str, list[str]] = {node: [] for node in deps}
    for node, node_deps in deps.items():
        for dep in node_deps:
            dependents[dep].append(node)
    waiting = {node: len(node_deps) for node, node_deps in deps.items()}
    ready = [node for node, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for dependent in dependents[node]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, dependent)
    if len(order) < len(deps):
        raise CycleError(_find_cycle(deps, set(deps) - set(order)))
    return order


def _find_cycle(deps: dict[str, set[str]], stuck: set[str]) -> list[str]:
    # Every stuck node has a stuck dependency, so walking dependencies must revisit a node.
    path: list[str] = []
    position: dict[str, int] = {}
    node = min(stuck)
    while node not in position:
        position[node] = len(path)
        path.append(node)
        node = min(d for d in deps[node] if d in stuck)
    cycle = path[position[node]:]
    start = cycle.index(min(cycle))
    return cycle[start:] + cycle[:start]
