"""Small, real task folders for the eval tests: a buggy `add`, its hidden tests and its fix."""

from __future__ import annotations

from pathlib import Path

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = (
    "from mathx import add, mul\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)

TOML = """\
id = "{task_id}"
title = "Fix add"
tags = ["bugfix"]
difficulty = "easy"

[limits]
max_steps = 5
max_cost_usd = 0.1
max_wall_s = 60

[tests]
command = "{command}"
timeout_s = {timeout_s}
fail_to_pass = {f2p}
pass_to_pass = {p2p}
"""


def write_task(
    root: Path,
    task_id: str = "fix-add",
    *,
    workspace: dict[str, str] | None = None,
    tests: dict[str, str] | None = None,
    solution: dict[str, str] | None = None,
    f2p: list[str] | None = None,
    p2p: list[str] | None = None,
    command: str = "pytest tests",
    timeout_s: float = 60,
    toml: str | None = None,
) -> Path:
    """Write a task folder `root/task_id`; every part defaults to a small sound task."""
    task_dir = root / task_id
    files = {
        "instruction.md": "Fix `add(a, b)` in `mathx.py` so that it returns the sum.\n",
        "task.toml": toml
        if toml is not None
        else TOML.format(
            task_id=task_id,
            command=command,
            timeout_s=timeout_s,
            f2p=_toml_list(f2p if f2p is not None else ["tests/test_mathx.py::test_add"]),
            p2p=_toml_list(p2p if p2p is not None else ["tests/test_mathx.py::test_mul"]),
        ),
    }
    for folder, contents in (
        ("workspace", workspace if workspace is not None else {"mathx.py": BUGGY}),
        ("tests", tests if tests is not None else {"test_mathx.py": TESTS}),
        ("solution", solution if solution is not None else {"mathx.py": FIXED}),
    ):
        (task_dir / folder).mkdir(parents=True, exist_ok=True)
        for rel, text in contents.items():
            files[f"{folder}/{rel}"] = text
    for rel, text in files.items():
        path = task_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return task_dir


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"
