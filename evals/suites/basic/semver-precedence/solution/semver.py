"""Compare and sort semantic version strings."""

import re
from functools import cmp_to_key

_VERSION = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)


def _parse(version: str) -> tuple[tuple[int, int, int], list[str] | None]:
    match = _VERSION.match(version)
    if not match:
        raise ValueError(f"not a semantic version: {version!r}")
    core = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    pre = match.group(4)
    return core, (pre.split(".") if pre else None)


def _compare_identifiers(x: str, y: str) -> int:
    x_num, y_num = x.isdigit(), y.isdigit()
    if x_num and y_num:
        a, b = int(x), int(y)
    elif x_num != y_num:
        return -1 if x_num else 1
    else:
        a, b = x, y
    return (a > b) - (a < b)


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as `a` is lower than, equal to or higher than `b`."""
    (core_a, pre_a), (core_b, pre_b) = _parse(a), _parse(b)
    if core_a != core_b:
        return -1 if core_a < core_b else 1
    if pre_a is None or pre_b is None:
        return (pre_a is None) - (pre_b is None)
    for x, y in zip(pre_a, pre_b):
        result = _compare_identifiers(x, y)
        if result:
            return result
    return (len(pre_a) > len(pre_b)) - (len(pre_a) < len(pre_b))


def sort_versions(versions: list[str]) -> list[str]:
    """The versions in ascending precedence."""
    for version in versions:
        _parse(version)
    return sorted(versions, key=cmp_to_key(compare))
