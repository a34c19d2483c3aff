"""The radix tree's host-memory tier: offloading evicted device leaves, evicting host leaves,
and bringing a matched host-tier path back to device pages.

Invariant kept here and in `radix.RadixCache`: device-resident nodes form a prefix-closed tree
under each root (a device node's parent is on device), host-only nodes hang below them, and a
node lives in exactly one tier.
"""

from __future__ import annotations

import heapq

from hitrate.engine.radix_nodes import Node, give, take


class HostTierMixin:
    """Mixed into `RadixCache`; uses its free stacks, heaps, hooks and stats."""

    def _offload(self, node: Node) -> bool:
        """Move a device leaf's pages to the host tier; False when the host tier cannot take it."""
        n = len(node.value)
        if n > self.host_pages:
            return False
        if n > len(self._host_free):
            self._evict_host(n - len(self._host_free), keep=node)
            if n > len(self._host_free):
                return False
        hpages = take(self._host_free, n)
        if self._on_offload is not None:
            self._on_offload(node.value, hpages)
        node.host = hpages
        node.value = None
        if not node.children:
            heapq.heappush(self._host_heap, (node.atime, node.uid, node))
        return True

    def _evict_host(self, pages: int, keep: Node | None = None) -> int:
        freed = 0
        heap = self._host_heap
        skipped = []
        while freed < pages and heap:
            atime, uid, node = heapq.heappop(heap)
            if node.host is None or node.value is not None or node.parent is None:
                continue
            if atime != node.atime:
                heapq.heappush(heap, (node.atime, uid, node))
                continue
            if node.lock or node is keep:
                skipped.append((atime, uid, node))
                continue
            if node.children:
                continue
            parent = node.parent
            freed += len(node.host)
            self._drop_subtree(node)
            if parent.parent is not None and parent.value is None and not parent.children:
                heapq.heappush(heap, (parent.atime, parent.uid, parent))
        for entry in skipped:
            heapq.heappush(heap, entry)
        return freed

    def _drop_subtree(self, node: Node) -> None:
        """Unlink `node` and release the host pages of it and everything below it. Device pages of
        `node` itself are the caller's to free; its descendants are host-only by invariant."""
        del node.parent.children[node.ckey]
        node.parent = None
        stack = [node]
        while stack:
            n = stack.pop()
            if n.host is not None:
                give(self._host_free, n.host)
                self.stats.host_evicted_pages += len(n.host)
                n.host = None
            if n is not node:
                n.parent = None
                n.value = None
            stack.extend(n.children.values())
            n.children = {}

    def _reload(self, root: Node, path: list, matched: int) -> tuple[Node, int, int]:
        """Bring the host-tier part of a matched path back to device pages, top-down. Stops early
        (shorter match) when the device pool cannot make room."""
        first_host = next(i for i, n in enumerate(path) if n.value is None)
        anchor = path[first_host - 1] if first_host else root
        host_nodes = path[first_host:]
        for n in host_nodes:  # protect the path from host eviction while we allocate
            n.lock += 1
        anchor.lock += 1
        depth = matched - sum(len(n.key) for n in host_nodes)
        node = anchor
        reloaded = 0
        try:
            for n in host_nodes:
                need = len(n.host)
                if need > len(self._free):
                    self._evict(need - len(self._free))
                if need > len(self._free):
                    break
                pages = take(self._free, need)
                if self._on_reload is not None:
                    self._on_reload(n.host, pages)
                give(self._host_free, n.host)
                n.host = None
                n.value = pages
                heapq.heappush(self._heap, (n.atime, n.uid, n))
                depth += len(n.key)
                reloaded += len(n.key)
                node = n
        finally:
            for n in host_nodes:
                n.lock -= 1
            anchor.lock -= 1
        return node, depth, reloaded
