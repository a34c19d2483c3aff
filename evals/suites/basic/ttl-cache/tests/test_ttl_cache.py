import pytest

import kvcache


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_cache_get_set_delete():
    cache = kvcache.Cache()
    cache.set("a", 1)
    assert cache.get("a") == 1
    assert cache.delete("a") is True
    assert cache.delete("a") is False
    assert len(cache) == 0


def test_entry_expires_after_ttl():
    clock = FakeClock()
    cache = kvcache.TTLCache(10, clock=clock)
    cache.set("a", 1)
    clock.now += 9.5
    assert cache.get("a") == 1
    clock.now += 0.5
    assert cache.get("a", "gone") == "gone"


def test_set_restarts_the_clock():
    clock = FakeClock()
    cache = kvcache.TTLCache(10, clock=clock)
    cache.set("a", 1)
    clock.now += 8
    cache.set("a", 2)
    clock.now += 8
    assert cache.get("a") == 2


def test_len_and_purge_drop_expired_entries():
    clock = FakeClock()
    cache = kvcache.TTLCache(5, clock=clock)
    cache.set("old1", 1)
    cache.set("old2", 2)
    clock.now += 3
    cache.set("new", 3)
    clock.now += 3
    assert len(cache) == 1
    assert cache.purge() == 2
    assert cache.purge() == 0
    assert cache.get("new") == 3


def test_rejects_non_positive_ttl():
    with pytest.raises(ValueError):
        kvcache.TTLCache(0)
