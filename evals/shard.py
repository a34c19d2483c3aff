"""`--shard i/n`: split a suite's tasks over n machines, deterministically.

Tasks are sorted by id and dealt round-robin: shard i (1-based) takes the tasks at positions
i-1, i-1+n, i-1+2n, ... Every task lands in exactly one shard, shard sizes differ by at most one,
and the split depends only on the set of task ids, so every machine computes the same one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")

T = TypeVar("T")


class Shard(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=1)
    """1-based."""
    count: int = Field(ge=1)

    @model_validator(mode="after")
    def _in_range(self) -> "Shard":
        if self.index > self.count:
            raise ValueError(f"shard {self.index}/{self.count}: the index must be between 1 and {self.count}")
        return self

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def select(self, items: Sequence[T], key=lambda item: item.id) -> list[T]:  # type: ignore[no-untyped-def]
        """This shard's items, in id order."""
        ordered = sorted(items, key=key)
        return [item for position, item in enumerate(ordered) if position % self.count == self.index - 1]


def parse_shard(text: str) -> Shard:
    """`"2/4"` -> Shard(index=2, count=4); anything else is a ValueError saying what to write."""
    match = _SHARD.match(text or "")
    if not match:
        raise ValueError(f"shard {text!r}: write i/n, e.g. 1/4 for the first of four shards")
    return Shard(index=int(match.group(1)), count=int(match.group(2)))
