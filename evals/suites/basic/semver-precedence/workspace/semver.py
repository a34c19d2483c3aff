"""Compare and sort semantic version strings."""

from functools import cmp_to_key


def _parse(version: str) -> tuple[str, str, str, str | None]:
    core, _, pre = version.partition("-")
    major, minor, patch = core.split(".")
    return major, minor, patch, (pre or None)


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as `a` is lower than, equal to or higher than `b`."""
    pa, pb = _parse(a), _parse(b)
    if pa[:3] != pb[:3]:
        return -1 if pa[:3] < pb[:3] else 1
    return 0


def sort_versions(versions: list[str]) -> list[str]:
    """The versions in ascending precedence."""
    return sorted(versions, key=cmp_to_key(compare))
