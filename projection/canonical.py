"""Canonical bytes, chained hashes and token estimates: the three primitives every section uses."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

# The hash a chain starts from (the parent of the first section).
ROOT_HASH = "0" * 64

TokenCounter = Callable[[bytes], int]
"""Counts the tokens of a section's canonical bytes. Callers with a real tokenizer pass one in."""


def canonical_json(value: Any) -> str:
    """JSON we generate, in the one form we ever send: sorted keys, no spaces, raw unicode.

    Non-ASCII text stays as UTF-8 instead of \\u escapes so a section's byte count tracks the
    text the provider actually tokenizes.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_bytes(value: Any) -> bytes:
    return canonical_json(value).encode("utf-8")


def sort_keys_deep(value: Any) -> Any:
    """A deep copy whose dicts are built in sorted-key order (so even a plain json.dumps is canonical)."""
    if isinstance(value, dict):
        return {str(k): sort_keys_deep(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [sort_keys_deep(v) for v in value]
    return value


def chain_hash(parent_hash: str, data: bytes) -> str:
    """sha256(parent hash + own bytes), hex. Equal hashes mean the whole prefix up to here is equal."""
    h = hashlib.sha256(parent_hash.encode("ascii"))
    h.update(data)
    return h.hexdigest()


def estimate_tokens(data: bytes) -> int:
    """About four bytes of UTF-8 per token: a cheap, tokenizer-free estimate (rounded up)."""
    return (len(data) + 3) // 4
