"""Small in-memory key-value caches."""

from kvcache.basic import Cache

__all__ = ["Cache"]
