"""hitrate.tools is a leaf: it imports no other hitrate component."""

from __future__ import annotations

import ast
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def test_tools_import_only_themselves() -> None:
    offenders = []
    for module in sorted(TOOLS.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in {"hitrate", "harness", "projection", "engine", "store", "tui", "evals"}:
                    if not name.startswith("hitrate.tools"):
                        offenders.append(f"{module.name}: {name}")
    assert offenders == []
