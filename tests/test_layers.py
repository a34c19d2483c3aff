"""The layer rule of docs/architecture.md, by test: which component may import which.

    tui, evals  ->  harness  ->  projection, tools, store, engine
    projection.caching imports nothing outside itself

Every import counts, including those inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = ("harness", "projection", "engine", "tools", "store", "tui", "evals")

ALLOWED: dict[str, set[str]] = {
    "tools": set(),
    "store": set(),
    "engine": set(),
    "projection": set(),
    "harness": {"projection", "tools", "store", "engine"},
    "evals": {"harness", "projection", "tools", "store", "engine"},
    "tui": {"harness", "projection", "tools", "store", "engine"},
}


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _hitrate_imports(folder: str) -> Iterator[tuple[Path, str]]:
    for path in sorted((ROOT / folder).rglob("*.py")):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] in COMPONENTS:
                yield path, f"bare import {name!r} (import through the hitrate namespace)"
            elif parts[0] == "hitrate" and len(parts) > 1:
                yield path, ".".join(parts[1:])


def test_each_component_imports_only_what_its_layer_allows() -> None:
    offenders = []
    for component in COMPONENTS:
        for path, target in _hitrate_imports(component):
            other = target.split(".")[0]
            if target.startswith("bare import") or (other != component and other not in ALLOWED[component]):
                offenders.append(f"{path.relative_to(ROOT)}: {target}")
    assert offenders == []


def test_the_caching_layer_imports_only_itself() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {target}"
        for path, target in _hitrate_imports("projection/caching")
        if not target.startswith("projection.caching")
    ]
    assert offenders == []
