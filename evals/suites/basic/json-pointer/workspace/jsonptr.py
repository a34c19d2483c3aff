"""Address values inside parsed JSON documents with JSON Pointers."""

from typing import Any


class PointerError(LookupError):
    pass


def resolve(doc: Any, pointer: str) -> Any:
    if pointer == "":
        return doc
    current = doc
    for token in pointer.split("/")[1:]:
        if isinstance(current, list):
            current = current[int(token)]
        elif isinstance(current, dict):
            if token not in current:
                raise PointerError(f"no key {token!r} in {pointer!r}")
            current = current[token]
        else:
            raise PointerError(f"cannot descend into {type(current).__name__} at {pointer!r}")
    return current
