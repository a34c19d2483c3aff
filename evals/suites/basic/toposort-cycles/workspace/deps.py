"""Order nodes so that each comes after the nodes it depends on."""


class CycleError(Exception):
    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__("dependency cycle: " + " -> ".join(cycle + cycle[:1]))


def topo_sort(graph: dict[str, list[str]]) -> list[str]:
    """Every node after its dependencies."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(node: str) -> None:
        if node in seen:
            return
        seen.add(node)
        for dependency in graph.get(node, []):
            visit(dependency)
        order.append(node)

    for node in graph:
        visit(node)
    return order
