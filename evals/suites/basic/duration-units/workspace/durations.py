"""Parse durations written like "1h30m" or "45s"."""

import re

_UNITS = {"h": 3600, "m": 60, "s": 1}
_TOKEN = re.compile(r"(\d+)([hms])")


def parse_duration(text: str) -> int:
    """Seconds in a duration such as "2h", "1h30m" or "90s"."""
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    position = 0
    total = 0
    for match in _TOKEN.finditer(text):
        if match.start() != position:
            raise ValueError(f"invalid duration: {text!r}")
        total += int(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(text):
        raise ValueError(f"invalid duration: {text!r}")
    return total
