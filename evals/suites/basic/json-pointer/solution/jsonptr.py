"""Address values inside parsed JSON documents with JSON Pointers (RFC 6901)."""

import copy
import re
from typing import Any

_INDEX = re.compile(r"0|[1-9][0-9]*")


class PointerError(LookupError):
    pass


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer must start with '/': {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _index(token: str, items: list) -> int:
    if not _INDEX.fullmatch(token):
        raise PointerError(f"bad array index {token!r}")
    index = int(token)
    if index >= len(items):
        raise PointerError(f"array index {index} out of range")
    return index


def _step(current: Any, token: str) -> Any:
    if isinstance(current, dict):
        if token not in current:
            raise PointerError(f"no key {token!r}")
        return current[token]
    if isinstance(current, list):
        return current[_index(token, current)]
    raise PointerError(f"cannot descend into {type(current).__name__}")


def resolve(doc: Any, pointer: str) -> Any:
    current = doc
    for token in _tokens(pointer):
        current = _step(current, token)
    return current


def set_value(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    result = copy.deepcopy(doc)
    parent = result
    for token in tokens[:-1]:
        parent = _step(parent, token)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            parent[_index(last, parent)] = value
    else:
        raise PointerError(f"cannot set inside {type(parent).__name__}")
    return result
