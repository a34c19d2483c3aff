"""Run-length encoding: "aaab" <-> "3a1b"."""

import re
from itertools import groupby

_RUN = re.compile(r"([0-9]+)([^0-9])", re.DOTALL)


def encode(text: str) -> str:
    if any(ch in "0123456789" for ch in text):
        raise ValueError("text containing digits cannot be run-length encoded")
    return "".join(f"{len(list(run))}{char}" for char, run in groupby(text))


def decode(data: str) -> str:
    out = []
    position = 0
    while position < len(data):
        match = _RUN.match(data, position)
        if not match:
            raise ValueError(f"malformed run-length data at index {position}: {data!r}")
        count = int(match.group(1))
        if count == 0:
            raise ValueError(f"zero-length run at index {position}")
        out.append(match.group(2) * count)
        position = match.end()
    return "".join(out)
