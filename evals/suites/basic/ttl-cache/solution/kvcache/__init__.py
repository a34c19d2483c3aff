"""Small in-memory key-value caches."""

from kvcache.basic import Cache
from kvcache.ttl import TTLCache

__all__ = ["Cache", "TTLCache"]
