"""Radix prefix index: match / insert / split / evict / salt isolation / locks / pins / host tier."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hitrate.engine.radix import RadixCache


class FakeKV:
    """Stands in for the KV pool: each page remembers which (salt, prefix) it holds, so a test can
    prove that every matched page holds the KV of exactly the requested prefix."""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.device: dict[int, tuple] = {}
        self.host: dict[int, tuple] = {}

    def writer(self, salt: str, tokens: list[int]):
        def write(start: int, end: int, pages: array) -> None:
            assert start % self.page_size == 0 and end % self.page_size == 0
            assert len(pages) == (end - start) // self.page_size
            for j, page in enumerate(pages):
                self.device[page] = (salt, tuple(tokens[: start + (j + 1) * self.page_size]))

        return write

    def offload(self, device_pages: array, host_pages: array) -> None:
        for d, h in zip(device_pages, host_pages):
            self.host[h] = self.device.pop(d)

    def reload(self, host_pages: array, device_pages: array) -> None:
        for h, d in zip(host_pages, device_pages):
            self.device[d] = self.host.pop(h)

    def assert_serves(self, lease, salt: str, tokens: list[int]) -> None:
        ps = self.page_size
        assert len(lease.pages) == lease.matched // ps
        for j, page in enumerate(lease.pages):
            assert self.device[page] == (salt, tuple(tokens[: (j + 1) * ps])), f"page {j} holds the wrong prefix"


def tree_pages(cache: RadixCache) -> tuple[list[int], list[int]]:
    device, host = [], []
    stack = list(cache._roots.values())
    while stack:
        node = stack.pop()
        if node.parent is not None:
            assert (node.value is None) != (node.host is None), "a node lives in exactly one tier"
            if node.value is not None:
                assert node.parent.value is not None, "device nodes form a prefix-closed tree"
                assert len(node.value) * cache.page_size == len(node.key)
                device.extend(node.value)
            else:
                assert len(node.host) * cache.page_size == len(node.key)
                host.extend(node.host)
            assert len(node.key) > 0 and len(node.key) % cache.page_size == 0
            assert node.parent.children[node.ckey] is node
        stack.extend(node.children.values())
    return device, host


def check_accounting(cache: RadixCache) -> None:
    device, host = tree_pages(cache)
    assert len(set(device)) == len(device), "a device page is referenced twice"
    assert not set(device) & set(cache._free), "a page is both free and in the tree"
    assert len(device) + len(cache._free) == cache.num_pages
    assert len(set(host)) == len(host) and not set(host) & set(cache._host_free)
    assert len(host) + len(cache._host_free) == cache.host_pages
    check_pins(cache)


def check_pins(cache: RadixCache) -> None:
    """Every live pin ends at a device node still in the tree; each node counts the pins at or
    below it; the pinned-page total counts each page on a pinned path once."""
    expected: dict = {}
    for node in cache._pins:
        assert node.value is not None and node.lock >= 1, "a pinned prefix left the device"
        n = node
        while n.parent is not None:
            expected[n] = expected.get(n, 0) + 1
            assert n.parent.children.get(n.ckey) is n, "a pinned node was unlinked"
            n = n.parent
    stack = list(cache._roots.values())
    while stack:
        node = stack.pop()
        if node.parent is not None:
            assert node.pinned_below == expected.get(node, 0)
        stack.extend(node.children.values())
    assert cache.pinned_pages == sum(len(n.key) for n in expected) // cache.page_size


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run_request(cache: RadixCache, kv: FakeKV, tokens: list[int], salt: str = "", **begin_kwargs):
    lease = cache.begin(tokens, salt, **begin_kwargs)
    kv.assert_serves(lease, salt, tokens)
    cache.finish(lease, tokens, kv.writer(salt, tokens))
    return lease


def test_match_insert_and_split():
    cache, kv = RadixCache(64), FakeKV(1)
    first = run_request(cache, kv, [1, 2, 3, 4, 5])
    assert first.matched == 0
    second = run_request(cache, kv, [1, 2, 3, 9, 9])
    assert second.matched == 3  # the [1..5] edge was split after 3 tokens
    root = cache._roots[""]
    (upper,) = root.children.values()
    assert upper.key == [1, 2, 3] and sorted(c.key for c in upper.children.values()) == [[4, 5], [9, 9]]
    assert cache.match_length([1, 2, 3, 4, 5, 6]) == 5
    assert cache.match_length([1, 2, 3, 9]) == 4
    assert cache.match_length([7]) == 0
    check_accounting(cache)


def test_page_size_rounds_matches_and_inserts_down_to_whole_pages():
    cache, kv = RadixCache(16, page_size=4), FakeKV(4)
    tokens = list(range(10))
    run_request(cache, kv, tokens)
    assert cache.used_pages == 2  # 8 of 10 tokens fit whole pages
    lease = run_request(cache, kv, list(range(7)) + [99, 99])
    assert lease.matched == 4  # 7 shared tokens round down to one page
    assert cache.match_length(list(range(8))) == 8
    check_accounting(cache)


def test_max_match_caps_the_hit():
    cache, kv = RadixCache(64), FakeKV(1)
    run_request(cache, kv, [5, 6, 7, 8])
    lease = run_request(cache, kv, [5, 6, 7, 8], max_match=3)
    assert lease.matched == 3


def test_lru_eviction_takes_the_least_recently_used_leaf():
    cache, kv = RadixCache(10), FakeKV(1)
    run_request(cache, kv, [1] * 5)
    run_request(cache, kv, [2] * 5)
    run_request(cache, kv, [1] * 5)  # touch [1]*5 so [2]*5 becomes least recently used
    run_request(cache, kv, [3] * 5)
    assert cache.match_length([1] * 5) == 5
    assert cache.match_length([2] * 5) == 0
    assert cache.match_length([3] * 5) == 5
    assert cache.stats.evicted_pages == 5
    check_accounting(cache)


def test_eviction_trims_only_the_tail_it_needs():
    cache, kv = RadixCache(10), FakeKV(1)
    run_request(cache, kv, list(range(10)))
    run_request(cache, kv, [50, 51, 52])
    assert cache.match_length(list(range(10))) == 7
    check_accounting(cache)


def test_salts_never_share_entries():
    cache, kv = RadixCache(64), FakeKV(1)
    run_request(cache, kv, [1, 2, 3, 4], salt="alice")
    lease = run_request(cache, kv, [1, 2, 3, 4], salt="bob")
    assert lease.matched == 0
    assert cache.match_length([1, 2, 3, 4], "alice") == 4
    assert cache.match_length([1, 2, 3, 4], "carol") == 0
    assert run_request(cache, kv, [1, 2, 3, 4, 5], salt="bob").matched == 4


def test_a_locked_path_is_never_evicted():
    cache, kv = RadixCache(8), FakeKV(1)
    held_tokens = [1, 1, 1, 1]
    run_request(cache, kv, held_tokens)
    held = cache.begin(held_tokens)
    for t in range(2, 7):  # far more than the pool holds
        run_request(cache, kv, [t] * 4)
    kv.assert_serves(held, "", held_tokens)
    assert cache.match_length(held_tokens) == 4
    cache.abort(held)
    run_request(cache, kv, [9] * 4)
    run_request(cache, kv, [8] * 4)
    assert cache.match_length(held_tokens) == 0  # unlocked, and now the least recently used
    check_accounting(cache)


def test_insert_when_everything_is_locked_stores_what_fits():
    cache, kv = RadixCache(4), FakeKV(1)
    run_request(cache, kv, [1, 2, 3])
    held = cache.begin([1, 2, 3])
    lease = cache.begin([7, 7, 7, 7])
    assert cache.finish(lease, [7, 7, 7, 7], kv.writer("", [7, 7, 7, 7])) == 1
    cache.abort(held)
    check_accounting(cache)


def test_finish_rejects_misuse():
    cache, kv = RadixCache(16), FakeKV(1)
    run_request(cache, kv, [1, 2, 3])
    lease = cache.begin([1, 2, 3, 4])
    with pytest.raises(ValueError, match="extend"):
        cache.finish(lease, [9, 9, 9, 9])
    with pytest.raises(ValueError, match="already finished"):
        cache.finish(lease, [1, 2, 3, 4])
    with pytest.raises(ValueError):
        RadixCache(0)


def test_failed_write_returns_pages_and_inserts_nothing():
    cache = RadixCache(16)

    def broken(start, end, pages):
        raise RuntimeError("device error")

    lease = cache.begin([1, 2, 3])
    with pytest.raises(RuntimeError):
        cache.finish(lease, [1, 2, 3], broken)
    assert cache.free_pages == 16 and cache.match_length([1, 2, 3]) == 0
    assert cache._roots[""].lock == 1


def test_pins_protect_a_prefix_until_they_expire():
    clock = FakeClock()
    cache, kv = RadixCache(12, clock=clock), FakeKV(1)
    pinned = [1, 2, 3, 4]
    lease = cache.begin(pinned + [5, 6])
    cache.finish(lease, pinned + [5, 6], kv.writer("", pinned + [5, 6]), pins=[(4, 300)])
    for t in range(10, 16):
        run_request(cache, kv, [t] * 4)
    assert cache.match_length(pinned) == 4  # the unpinned tail [5, 6] may go, the pin stays
    check_accounting(cache)
    clock.now += 301
    for t in range(20, 26):
        run_request(cache, kv, [t] * 4)
    assert cache.match_length(pinned) == 0
    assert cache.active_pins == 0 and cache.pinned_pages == 0
    check_accounting(cache)


def test_each_pin_keeps_its_own_ttl_a_1h_head_outlives_a_5m_tail():
    clock = FakeClock()
    cache, kv = RadixCache(24, clock=clock), FakeKV(1)
    head, tail = [1, 2, 3, 4], [5, 6, 7, 8]
    prompt = head + tail + [9, 9]
    lease = cache.begin(prompt)
    cache.finish(lease, prompt, kv.writer("", prompt), pins=[(8, 300.0), (4, 3600.0)])
    assert cache.active_pins == 2 and cache.pinned_pages == 8  # nested pins: shared head pages once

    def pressure(first_token: int) -> None:  # fill the pool with other prefixes, LRU evicts the rest
        for t in range(first_token, first_token + 8):
            run_request(cache, kv, [t] * 6)

    pressure(100)
    assert cache.match_length(prompt) == 8, "both pins hold under pressure while they are live"
    clock.now += 301  # the 5m pin has run out, the 1h pin has not
    pressure(200)
    assert cache.match_length(prompt) == 4, "the tail went, the 1h head stayed"
    assert cache.active_pins == 1 and cache.pinned_pages == 4
    check_accounting(cache)
    clock.now += 3600
    pressure(300)
    assert cache.match_length(prompt) == 0 and cache.pinned_pages == 0
    check_accounting(cache)


def test_nested_pins_count_shared_pages_once_against_the_cap():
    cache, kv = RadixCache(16, clock=FakeClock(), max_pinned_fraction=0.5), FakeKV(1)
    prompt = list(range(1, 9))
    lease = cache.begin(prompt)
    # 2 + 4 + 6 + 8 pages if each pin counted its whole prefix; 8 distinct pages fit the cap of 8.
    cache.finish(lease, prompt, kv.writer("", prompt), pins=[(8, 60.0), (2, 60.0), (6, 60.0), (4, 60.0)])
    assert cache.active_pins == 4 and cache.pinned_pages == 8 and cache.stats.pinned_skipped == 0
    other = [50] * 8
    lease = cache.begin(other)
    cache.finish(lease, other, kv.writer("", other), pins=[(1, 60.0)])
    assert cache.stats.pinned_skipped == 1 and cache.match_length(prompt) == 8
    check_accounting(cache)


def test_re_pinning_keeps_the_later_expiry():
    clock = FakeClock()
    cache, kv = RadixCache(8, clock=clock), FakeKV(1)
    prompt = [1, 2, 3, 4]
    for ttl in (3600.0, 300.0):  # a later 5m mark on the same prefix does not shorten the 1h pin
        lease = cache.begin(prompt)
        cache.finish(lease, prompt, kv.writer("", prompt), pins=[(4, ttl)])
    assert cache.active_pins == 1
    clock.now += 301
    for t in range(10, 14):
        run_request(cache, kv, [t] * 4)
    assert cache.match_length(prompt) == 4
    check_accounting(cache)


def test_host_tier_keeps_evicted_pages_and_brings_them_back():
    kv = FakeKV(1)
    cache = RadixCache(8, host_pages=16, on_offload=kv.offload, on_reload=kv.reload)
    first = [1, 2, 3, 4, 5, 6]
    run_request(cache, kv, first)
    run_request(cache, kv, [9] * 6)  # pushes most of `first` to the host tier
    assert cache.stats.offloaded_pages >= 4
    lease = run_request(cache, kv, first + [7])
    assert lease.matched == 6 and lease.reloaded >= 4
    assert cache.stats.host_hit_tokens == lease.reloaded
    check_accounting(cache)


def test_host_tier_evicts_its_own_lru_leaves_when_full():
    kv = FakeKV(1)
    cache = RadixCache(4, host_pages=4, on_offload=kv.offload, on_reload=kv.reload)
    for t in range(1, 6):
        run_request(cache, kv, [t] * 4)
    assert cache.host_used_pages == 4 and cache.stats.host_evicted_pages > 0
    assert cache.match_length([5] * 4) == 4 and cache.match_length([4] * 4) == 4
    assert cache.match_length([1] * 4) == 0
    check_accounting(cache)


# --------------------------------------------------------------------- property tests

token_runs = st.lists(st.integers(0, 3), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    page_size=st.sampled_from([1, 2, 3]),
    num_pages=st.integers(3, 24),
    host_pages=st.sampled_from([0, 0, 6, 20]),
    ops=st.lists(
        st.tuples(
            st.sampled_from(["", "", "t2"]),  # salt
            token_runs,  # tokens for begin
            st.lists(st.integers(0, 3), max_size=5),  # reply appended at finish
            st.booleans(),  # keep the lease open across the next request
            st.booleans(),  # cap the match at len - 1
            st.lists(st.tuples(st.integers(0, 14), st.sampled_from([5.0, 50.0])), max_size=2),  # pins
            st.sampled_from([0.0, 0.0, 10.0, 60.0]),  # clock advance before the request
        ),
        min_size=1,
        max_size=25,
    ),
)
def test_random_lifecycles_serve_only_correct_pages(page_size, num_pages, host_pages, ops):
    kv = FakeKV(page_size)
    clock = FakeClock()
    cache = RadixCache(num_pages, page_size, host_pages=host_pages, on_offload=kv.offload, on_reload=kv.reload,
                       clock=clock)
    inserted: dict[str, list[list[int]]] = {}
    held: list[tuple] = []
    evicting = False
    for salt, tokens, reply, keep_open, cap, pins, advance in ops:
        clock.now += advance
        lease = cache.begin(tokens, salt, max_match=len(tokens) - 1 if cap else None)
        kv.assert_serves(lease, salt, tokens)  # every served page holds exactly this salt's prefix
        assert lease.matched % page_size == 0 and lease.matched <= len(tokens)
        best = max((_lcp(tokens, s) for s in inserted.get(salt, [])), default=0)
        limit = len(tokens) - 1 if cap else len(tokens)
        assert lease.matched <= min(best, limit)
        if not evicting and cache.stats.evicted_pages == 0:
            assert lease.matched == min(best, limit) // page_size * page_size
        for old_lease, old_salt, old_tokens in held:  # locked prefixes survive everything
            kv.assert_serves(old_lease, old_salt, old_tokens)
        full = tokens + reply
        if keep_open and len(held) < 2:
            held.append((lease, salt, full))
            continue
        cache.finish(lease, full, kv.writer(salt, full), pins=pins)
        inserted.setdefault(salt, []).append(full)
        evicting = evicting or cache.stats.evicted_pages > 0 or cache.free_pages == 0
        check_accounting(cache)
    for lease, salt, full in held:
        cache.finish(lease, full, kv.writer(salt, full))
    check_accounting(cache)
    clock.now += 1000  # every pin runs out and releases its lock at the next eviction
    cache.evict(0)
    check_accounting(cache)
    locks = []
    stack = [n for root in cache._roots.values() for n in root.children.values()]
    while stack:
        node = stack.pop()
        locks.append(node.lock)
        stack.extend(node.children.values())
    assert all(lock == 0 for lock in locks), "every lock was released"


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
