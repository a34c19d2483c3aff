"""A plain in-memory key-value cache."""

from typing import Any, Hashable


class Cache:
    def __init__(self) -> None:
        self._data: dict = {}

    def set(self, key: Hashable, value: Any) -> None:
        self._data[key] = value

    def get(self, key: Hashable, default: Any = None) -> Any:
        return self._data.get(key, default)

    def delete(self, key: Hashable) -> bool:
        """Remove `key`; return whether it was present."""
        return self._data.pop(key, _MISSING) is not _MISSING

    def __len__(self) -> int:
        return len(self._data)


_MISSING = object()
