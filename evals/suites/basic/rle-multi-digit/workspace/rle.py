"""Run-length encoding: "aaab" <-> "3a1b"."""

from itertools import groupby


def encode(text: str) -> str:
    return "".join(f"{len(list(run))}{char}" for char, run in groupby(text))


def decode(data: str) -> str:
    out = []
    for i in range(0, len(data), 2):
        out.append(data[i + 1] * int(data[i]))
    return "".join(out)
