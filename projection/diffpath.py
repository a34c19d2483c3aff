"""Where two versions of one section first differ: a line number for text, a JSON path for JSON."""

from __future__ import annotations

import json
from typing import Any


def first_line_difference(old: str, new: str) -> int:
    """1-based number of the first line that differs (one past the shorter text if one extends the other)."""
    a, b = old.split("\n"), new.split("\n")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i + 1
    return min(len(a), len(b)) + 1


def json_path_child(path: str, key: Any) -> str:
    """`path` extended by one step: `[3]` for a list index, `.name` for an identifier key,
    `["a key"]` for any other key."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def first_json_difference(old: Any, new: Any, path: str = "$") -> str | None:
    """JSON path of the first difference (keys in sorted order, list items in order); None if equal.

    Inside a multi-line string the line is added: `$.content[0].content, line 12`.
    """
    if old == new:
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new:
                return json_path_child(path, key)
            found = first_json_difference(old[key], new[key], json_path_child(path, key))
            if found is not None:
                return found
        return path
    if isinstance(old, list) and isinstance(new, list):
        for i, (x, y) in enumerate(zip(old, new)):
            found = first_json_difference(x, y, json_path_child(path, i))
            if found is not None:
                return found
        return json_path_child(path, min(len(old), len(new)))
    if isinstance(old, str) and isinstance(new, str) and ("\n" in old or "\n" in new):
        return f"{path}, line {first_line_difference(old, new)}"
    return path


def section_difference(old: bytes, new: bytes, *, is_json: bool) -> str:
    """A human-readable location of the first difference between two section bodies."""
    if is_json:
        try:
            found = first_json_difference(json.loads(old), json.loads(new))
        except (json.JSONDecodeError, UnicodeDecodeError):
            found = None
        if found is not None:
            return found
        return "$"
    return f"line {first_line_difference(old.decode('utf-8', errors='replace'), new.decode('utf-8', errors='replace'))}"
