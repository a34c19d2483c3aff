"""Radix tree over token ids that maps cached prefixes to KV pages.

Edges hold runs of token ids (Python lists, compared with C-speed slice equality); each node
holds the page ids of its run (`array('q')`, one id per `page_size` tokens). Every tenant salt
has its own root, so a request can only ever match entries inserted under its own salt.

Request lifecycle:
    lease = cache.begin(tokens, salt)        # match + lock (+ bring host-tier pages back)
    ... the runner computes KV for tokens[lease.matched:] ...
    cache.finish(lease, tokens, write)        # insert the new part, `write` fills its pages; unlock

Why it is fast in pure Python:
- child dicts keyed by the first token (page_size 1) or the first page's tuple;
- whole-edge comparisons are one list-slice equality (C loop); a mismatch inside an edge is
  located by galloping + bisection on slices, never a per-token Python loop over long runs;
- a lock is held on the lease's last node only: ancestors of a locked node always have a child,
  and only leaves are ever evicted, so locking the whole path would add nothing;
- free pages are an `array('q')` stack: allocating or freeing n pages is one C-level slice;
- LRU eviction pops a heap of (last access, node) entries that is validated lazily: touching a
  node only bumps its stamp, and stale entries are re-pushed when popped.

Pins: `finish(..., pins=[(n, ttl_s), ...])` protects each prefix tokens[:n] from eviction until its
own expiry (a 1h pin on a static head outlives a 5m pin on the moving tail). A pin locks the node
that ends its prefix; every node keeps a count of the pins at or below it, so pages shared by
nested pins count once against the cap on how much of the pool pins may hold. Expiry is read from
an injectable `clock` (monotonic seconds).

Sliding-window pages: with `window_tokens` (the window of a model's sliding layers) and
`window_pages`, each page's sliding-layer K/V lives in a separate window page that is released
once no cached end needs it; see `radix_window`. Not combined with the host tier.

Host tier: when `host_pages > 0`, an evicted device leaf is copied to host pages (through the
`on_offload` hook) and stays matchable; `begin` copies it back (`on_reload`) instead of letting the
runner recompute it. Host leaves are themselves evicted LRU when the host tier is full.
"""

from __future__ import annotations

import heapq
import time
from array import array
from typing import Callable, Iterable

from hitrate.engine.radix_host import HostTierMixin
from hitrate.engine.radix_window import SlidingWindowMixin
from hitrate.engine.radix_nodes import (
    Lease,
    Node,
    PageHook,
    RadixStats,
    WriteHook,
    common_prefix_from,
    common_prefix_length,
    give,
    take,
)

__all__ = ["RadixCache", "Lease", "RadixStats", "common_prefix_length", "PageHook", "WriteHook"]

class RadixCache(HostTierMixin, SlidingWindowMixin):
    """Prefix index over `num_pages` device pages of `page_size` tokens each."""

    def __init__(
        self,
        num_pages: int,
        page_size: int = 1,
        *,
        host_pages: int = 0,
        on_offload: PageHook | None = None,
        on_reload: PageHook | None = None,
        max_pinned_fraction: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        window_tokens: int | None = None,
        window_pages: int = 0,
    ) -> None:
        if num_pages < 1 or page_size < 1 or host_pages < 0 or window_pages < 0:
            raise ValueError("num_pages and page_size must be >= 1, host_pages and window_pages >= 0")
        if window_tokens and window_pages and host_pages:
            raise ValueError("sliding-window pages and the host tier cannot be combined")
        self.page_size = page_size
        self.num_pages = num_pages
        self.host_pages = host_pages
        # Free stacks, allocated from the end. Runs are kept in descending order so that an
        # allocation (tail slice, reversed) hands out ascending consecutive page ids: a cached
        # prefix then occupies a few contiguous slot runs, which the KV pool copies as slices.
        self._free = array("q", range(num_pages - 1, -1, -1))
        self._host_free = array("q", range(host_pages - 1, -1, -1))
        self._on_offload = on_offload
        self._on_reload = on_reload
        self._roots: dict[str, Node] = {}
        self._heap: list = []  # (atime, uid, node) candidates for device eviction
        self._host_heap: list = []  # same, for host-tier eviction
        self._tick = 0
        self._uid = 0
        self.clock = clock
        self._pins: dict[Node, float] = {}  # node ending a pinned prefix -> expiry on `clock`
        self._pinned_pages = 0  # distinct device pages on pinned paths
        self._max_pinned_fraction = max_pinned_fraction
        self._max_pinned_pages = int(num_pages * max_pinned_fraction)
        self.stats = RadixStats()
        self._init_windows(window_tokens, window_pages)

    # ------------------------------------------------------------------ public API

    @property
    def free_pages(self) -> int:
        return len(self._free)

    @property
    def used_pages(self) -> int:
        return self.num_pages - len(self._free)

    @property
    def host_used_pages(self) -> int:
        return self.host_pages - len(self._host_free)

    @property
    def pinned_pages(self) -> int:
        """Device pages protected by live pins (each page once, however many pins cover it)."""
        return self._pinned_pages

    @property
    def active_pins(self) -> int:
        return len(self._pins)

    def begin(
        self, tokens: list, salt: str = "", *, max_match: int | None = None, reserve: int | None = None
    ) -> Lease:
        """Match the longest cached prefix of `tokens` (at most `max_match` tokens), lock it and
        make room for `reserve` more tokens (default: the unmatched rest of `tokens`)."""
        limit = len(tokens) if max_match is None else max(0, min(max_match, len(tokens)))
        lease = self._lock_match(tokens, salt, limit)
        matched = lease.matched
        stats = self.stats
        stats.queries += 1
        stats.query_tokens += len(tokens)
        stats.hit_tokens += matched
        stats.host_hit_tokens += lease.reloaded
        self._expire_pins()
        need = (len(tokens) - matched if reserve is None else reserve) // self.page_size
        if need > len(self._free):
            self._evict(need - len(self._free))
        return lease

    def checkpoint(self, lease: Lease, tokens: list, write: WriteHook | None = None) -> Lease:
        """Insert `tokens` like `finish`, but keep them locked: returns a lease ending where the
        cached prefix of `tokens` now ends, for a request that goes on and will `finish` a longer
        sequence later. Lets concurrent requests hit a prompt while its reply is still generating.
        Not counted as a query."""
        self.finish(lease, tokens, write)
        return self._lock_match(tokens, lease.salt, len(tokens))

    def _lock_match(self, tokens: list, salt: str, limit: int) -> Lease:
        root = self._roots.get(salt)
        if root is None:
            root = self._new_root(salt)
        node, matched, path = self._match(root, tokens, limit)
        reloaded = 0
        if node.value is None:  # the match runs into host-tier nodes
            node, matched, reloaded = self._reload(root, path, matched)
        windows = None
        if self.window_tokens:
            keep = self._hit_end(path)
            if keep < len(path):  # the window before the match's end was released: end earlier
                self.stats.window_shortened_hits += 1
                path = path[:keep]
                node = path[-1] if path else root
                matched = sum(len(n.key) for n in path)
            self._hold_end(path)
            windows = array("q")
            for n in path:
                windows += n.window
        node.lock += 1
        pages = array("q")
        for n in path:
            if n.value is None:
                break
            pages += n.value
        return Lease(node, matched, pages, salt, reloaded, windows)

    def finish(
        self,
        lease: Lease,
        tokens: list,
        write: WriteHook | None = None,
        *,
        pins: Iterable[tuple[int, float]] = (),
    ) -> int:
        """Insert `tokens` (which must extend the leased prefix), unlock, and return how many new
        tokens were stored. `write(start, end, pages)` must fill `pages` with the KV of tokens
        [start, end); it is called once, before the new node becomes visible. In sliding-window mode
        it is called as `write(start, end, pages, window_pages)`, `pages` (full layers) or
        `window_pages` (sliding layers) being None when only the other part is written. Each `(n, ttl_s)` in
        `pins` then pins tokens[:n] for ttl_s seconds (shortest prefix first, so that when the cap
        refuses a pin it is a longer one and the shared head stays protected)."""
        if lease.done:
            raise ValueError("lease already finished")
        lease.done = True
        node = lease.node
        try:
            # Cheap guard against a caller passing a different sequence: the last leased edge must match.
            if node.parent is not None and tokens[lease.matched - len(node.key) : lease.matched] != node.key:
                raise ValueError("tokens do not extend the prefix matched by begin()")
            inserted, end_node, end = self._insert_below(node, lease.matched, tokens, write)
            if self.window_tokens:
                end_node.lock += 1
                try:
                    self._fill_windows(end_node, end, write)  # the new end's window first
                    if inserted:  # then, while pages last, the rest of the new leaf (released below)
                        self._fill_windows(end_node, end, write, low=end - inserted, evict=False)
                finally:
                    end_node.lock -= 1
        finally:
            node.lock -= 1
        for length, ttl_s in sorted(pins):
            if length > 0 and ttl_s > 0:
                self.pin(tokens, lease.salt, length, ttl_s)
        if self.window_tokens:
            self._release_windows(self._roots[lease.salt])
        return inserted

    def abort(self, lease: Lease) -> None:
        """Release a lease without inserting anything (request failed or was cancelled)."""
        if not lease.done:
            lease.done = True
            lease.node.lock -= 1

    def match_length(self, tokens: list, salt: str = "") -> int:
        """Read-only probe: cached prefix length on device + host, without locking or splitting."""
        node = self._roots.get(salt)
        if node is None:
            return 0
        pos, n, ps = 0, len(tokens), self.page_size
        while pos < n:
            child = node.children.get(tokens[pos] if ps == 1 else tuple(tokens[pos : pos + ps]))
            if child is None:
                break
            key = child.key
            if tokens[pos : pos + len(key)] == key:
                pos += len(key)
                node = child
                continue
            return pos + common_prefix_from(key, tokens, pos) // ps * ps
        return pos

    def pin(self, tokens: list, salt: str, pin_tokens: int, ttl_s: float) -> bool:
        """Protect the cached prefix tokens[:pin_tokens] (rounded down to whole pages, and only as
        far as it is cached on device) from eviction for `ttl_s` seconds. Re-pinning a prefix keeps
        the later expiry. False when nothing is cached or the pin cap refuses it."""
        root = self._roots.get(salt)
        if root is None:
            return False
        node, _matched, path = self._match(root, tokens, min(pin_tokens, len(tokens)))
        if node is root or node.value is None:
            return False
        self._expire_pins()  # free the cap of pins that ran out before checking it
        expiry = self.clock() + ttl_s
        if node in self._pins:
            self._pins[node] = max(self._pins[node], expiry)
            return True
        if self._pinned_pages + self._unpinned_pages_above(node) > self._max_pinned_pages:
            self.stats.pinned_skipped += 1
            return False
        self._pins[node] = expiry
        node.lock += 1
        if self.window_tokens:
            self._hold_end(path)
        self._count_pin(node, +1)
        return True

    def evict(self, pages: int) -> int:
        """Free at least `pages` device pages if unlocked leaves allow; returns pages freed."""
        return self._evict(pages)

    def reset(self) -> None:
        """Drop every entry (locks held by live leases must have been released)."""
        self.__init__(  # type: ignore[misc]
            self.num_pages,
            self.page_size,
            host_pages=self.host_pages,
            on_offload=self._on_offload,
            on_reload=self._on_reload,
            max_pinned_fraction=self._max_pinned_fraction,
            clock=self.clock,
            window_tokens=self.window_tokens,
            window_pages=self.window_pages,
        )

    # ------------------------------------------------------------------ internals

    def _new_root(self, salt: str) -> Node:
        root = Node([], array("q"), None, None, -1)
        root.lock = 1  # roots are never evicted
        self._roots[salt] = root
        return root

    def _match(self, node: Node, tokens: list, limit: int) -> tuple[Node, int, list]:
        """Walk from `node` along tokens[:limit], splitting a partially matched edge so that the
        returned node ends exactly at the match. Page granularity: matches round down."""
        ps = self.page_size
        self._tick += 1
        tick = self._tick
        pos = 0
        path = []
        limit -= limit % ps
        children = node.children
        while pos < limit:
            child = children.get(tokens[pos] if ps == 1 else tuple(tokens[pos : pos + ps]))
            if child is None:
                break
            key = child.key
            klen = len(key)
            if pos + klen <= limit and tokens[pos : pos + klen] == key:
                child.atime = tick
                path.append(child)
                pos += klen
                node = child
                children = child.children
                continue
            m = common_prefix_from(key, tokens, pos)
            m = min(m, limit - pos)
            m -= m % ps
            if m == 0:
                break
            child = self._split(child, m)
            child.atime = tick
            path.append(child)
            pos += m
            node = child
            break
        return node, pos, path

    def _split(self, child: Node, m: int) -> Node:
        """Cut `child`'s edge after m tokens; the new upper node is returned and the original object
        keeps the lower part, so leases holding it still end at the same depth."""
        ps = self.page_size
        self._uid += 1
        upper = Node(child.key[:m], None, child.parent, child.ckey, self._uid)
        p = m // ps
        if child.value is not None:
            upper.value = child.value[:p]
            child.value = child.value[p:]
        if child.host is not None:
            upper.host = child.host[:p]
            child.host = child.host[p:]
        # upper.lock stays 0: it has `child` below it, and only leaves are ever evicted, so a lock
        # held on `child` already protects it.
        self._split_windows(upper, child, p)
        upper.atime = child.atime
        upper.pinned_below = child.pinned_below  # the same pins end at or below both halves
        child.parent.children[child.ckey] = upper
        child.key = child.key[m:]
        child.ckey = child.key[0] if ps == 1 else tuple(child.key[:ps])
        child.parent = upper
        upper.children[child.ckey] = child
        return upper

    def _insert_below(self, node: Node, depth: int, tokens: list, write: WriteHook | None) -> tuple[int, Node, int]:
        """Insert tokens[depth:] below `node`; returns (tokens stored, the node where the stored
        path now ends, its depth)."""
        ps = self.page_size
        end = len(tokens) - len(tokens) % ps
        pos = depth
        # Walk down whatever another request inserted below the lease meanwhile (deduplication).
        while pos < end:
            child = node.children.get(tokens[pos] if ps == 1 else tuple(tokens[pos : pos + ps]))
            if child is None or child.value is None:
                if child is not None:  # host-only copy of these tokens: drop it, ours is fresher
                    self._drop_subtree(child)
                break
            key = child.key
            klen = len(key)
            if pos + klen <= end and tokens[pos : pos + klen] == key:
                pos += klen
                node = child
                continue
            m = common_prefix_from(key, tokens, pos)
            m = min(m, end - pos)
            m -= m % ps
            if m == 0:
                break
            node = self._split(child, m)
            pos += m
            break
        if pos >= end:
            return 0, node, pos
        want = (end - pos) // ps
        if want > len(self._free):
            node.lock += 1  # keep the insertion point alive while making room
            try:
                self._evict(want - len(self._free))
            finally:
                node.lock -= 1
        got = min(want, len(self._free))
        if got == 0:
            return 0, node, pos
        pages = take(self._free, got)
        stop = pos + got * ps
        if write is not None:
            try:
                if self.window_tokens:
                    write(pos, stop, pages, None)
                else:
                    write(pos, stop, pages)
            except BaseException:
                give(self._free, pages)
                raise
        self._uid += 1
        ckey = tokens[pos] if ps == 1 else tuple(tokens[pos : pos + ps])
        leaf = Node(tokens[pos:stop], pages, node, ckey, self._uid)
        if self.window_tokens:
            self._new_leaf_windows(leaf)
        self._tick += 1
        leaf.atime = self._tick
        node.children[ckey] = leaf
        heapq.heappush(self._heap, (leaf.atime, leaf.uid, leaf))
        self.stats.inserted_tokens += stop - pos
        return stop - pos, leaf, stop

    def _is_device_leaf(self, node: Node) -> bool:
        for c in node.children.values():
            if c.value is not None:
                return False
        return True

    def _evict(self, pages: int) -> int:
        """Evict unlocked device leaves, least recently used first, until `pages` pages are freed."""
        self._expire_pins()  # a pin that ran out since the last request protects nothing any more
        freed = 0
        heap = self._heap
        skipped = []
        host = self.host_pages > 0
        stats = self.stats
        while freed < pages and heap:
            atime, uid, node = heapq.heappop(heap)
            if node.value is None or node.parent is None:
                continue  # already evicted or offloaded
            if atime != node.atime:
                heapq.heappush(heap, (node.atime, uid, node))  # touched since: requeue at its new age
                continue
            if node.lock:
                skipped.append((atime, uid, node))
                continue
            if node.children and (not host or not self._is_device_leaf(node)):
                continue  # re-pushed when its last device child leaves
            if len(node.value) > pages - freed and not self.window_tokens:
                # Evict only the tail pages the caller needs; the head of this leaf (older,
                # more shared positions) stays cached and becomes the next LRU candidate.
                self._split(node, len(node.key) - (pages - freed) * self.page_size)
            parent = node.parent
            value = node.value
            n = len(value)
            if host and self._offload(node):
                stats.offloaded_pages += n
            else:
                self._drop_windows(node)
                self._drop_subtree(node)
            give(self._free, value)
            freed += n
            stats.evicted_pages += n
            if parent.parent is not None and self._is_device_leaf(parent):
                heapq.heappush(heap, (parent.atime, parent.uid, parent))
        for entry in skipped:
            heapq.heappush(heap, entry)
        return freed

    def _expire_pins(self) -> None:
        if not self._pins:
            return
        now = self.clock()
        for node, expiry in list(self._pins.items()):
            if expiry <= now:
                del self._pins[node]
                node.lock -= 1
                self._count_pin(node, -1)
                if node.parent is not None and node.value is not None and self._is_device_leaf(node):
                    heapq.heappush(self._heap, (node.atime, node.uid, node))

    def _count_pin(self, node: Node, delta: int) -> None:
        """Add (+1) or remove (-1) one pin ending at `node` in the counts along its path; a node's
        pages count as pinned while any pin ends at or below it."""
        ps = self.page_size
        while node.parent is not None:
            node.pinned_below += delta
            if delta > 0 and node.pinned_below == 1:
                self._pinned_pages += len(node.key) // ps
            elif delta < 0 and node.pinned_below == 0:
                self._pinned_pages -= len(node.key) // ps
            node = node.parent

    def _unpinned_pages_above(self, node: Node) -> int:
        """Pages a new pin ending at `node` would add: pinned nodes form a prefix-closed set, so the
        walk up stops at the first node already covered."""
        pages = 0
        while node.parent is not None and node.pinned_below == 0:
            pages += len(node.key) // self.page_size
            node = node.parent
        return pages

