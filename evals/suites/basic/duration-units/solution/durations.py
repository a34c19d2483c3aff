"""Parse and format durations written like "1h30m" or "45s"."""

import re

_ORDER = ("w", "d", "h", "m", "s")
_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_TOKEN = re.compile(r"(\d+)([wdhms])")


def parse_duration(text: str) -> int:
    """Seconds in a duration such as "2h", "1h30m", "1w2d" or "90s"."""
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    position = 0
    total = 0
    last_rank = -1
    for match in _TOKEN.finditer(text):
        if match.start() != position:
            raise ValueError(f"invalid duration: {text!r}")
        rank = _ORDER.index(match.group(2))
        if rank <= last_rank:
            raise ValueError(f"units out of order or repeated: {text!r}")
        last_rank = rank
        total += int(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(text):
        raise ValueError(f"invalid duration: {text!r}")
    return total


def format_duration(seconds: int) -> str:
    """Canonical text for a duration: "1d2h3m4s", "1w", "0s"."""
    if seconds < 0:
        raise ValueError("negative duration")
    parts = []
    for unit in _ORDER:
        count, seconds = divmod(seconds, _UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
