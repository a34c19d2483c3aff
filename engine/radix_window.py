"""Sliding-window pages for the radix tree: the sliding layers' K/V of a cached position is held
only while some cached end still needs it.

A model with sliding-window layers (Gemma 3: 15 of 18 layers, window 512) needs, to continue a
sequence from position m, every position of its full-attention layers but only positions
[m - W, m) of its sliding layers. So each device page has two parts: its full-layer K/V (the
page itself, as without windows) and a *window page* with its sliding-layer K/V. The ends that
must stay hit-able are the leaves (the end of every cached sequence) and every locked node (a
running request's match, a pin); a window page that lies more than W tokens before every such
end below it is *released*.

Released is not gone, as in vLLM's lazy block eviction: a released window page keeps its K/V and
stays hit-able, but it no longer counts as held and is the first to be *reclaimed* (oldest
release first) when a new end needs window pages. Within a node, pages are released and
reclaimed in position order, so each node's window array is: reclaimed (-1) pages
`[0, wstart)`, released pages `[wstart, wheld)`, held pages `[wheld, len)`.

A match may end only where the whole window before it is still cached: `_hit_end` cuts a match
back to the deepest node end on its path that satisfies this (an end reaching back to position 0
needs no more than it has). When a sequence is inserted, the pages covering its last W positions
are held again (`_fill_windows`; reclaimed ones are rewritten from the request's row), so a
branch that splits an old path is hit-able at its own end.

Eviction takes whole leaves in this mode: the head of a leaf without its tail would end in a
released window.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict

from hitrate.engine.radix_nodes import Node, give, take

_NO_PAGE = -1


class SlidingWindowMixin:
    """Mixed into `RadixCache`; uses its page size, eviction and stats."""

    def _init_windows(self, window_tokens: int | None, window_pages: int) -> None:
        on = bool(window_tokens) and window_pages > 0
        self.window_tokens = int(window_tokens) if on else None
        self.window_pages = window_pages if on else 0
        self._window_free = array("q", range(self.window_pages - 1, -1, -1))
        self._window_released: OrderedDict[int, Node] = OrderedDict()  # page -> owner, oldest release first

    @property
    def window_used_pages(self) -> int:
        """Window pages held for a hit-able end (released ones are not counted)."""
        return self.window_pages - len(self._window_free) - len(self._window_released)

    @property
    def window_released_pages(self) -> int:
        return len(self._window_released)

    def _window_need(self) -> int:
        """Pages before a page-aligned end that its window covers."""
        return -(-self.window_tokens // self.page_size)

    # ------------------------------------------------------------------ matching

    def _hit_end(self, path: list) -> int:
        """How many nodes of a matched `path` (root side first) the hit may keep: the deepest
        node end whose preceding W positions all still have their window part."""
        need = self._window_need()
        k = len(path)
        while k > 0:
            run = 0
            i = k - 1
            while True:
                n = path[i]
                run += len(n.window) - n.wstart
                if run >= need:
                    return k
                if n.wstart > 0:
                    break  # a reclaimed page inside the window: every end from here to k fails
                if i == 0:
                    return k  # the window reaches position 0 with nothing missing
                i -= 1
            k = i
        return 0

    def _hold_end(self, path: list) -> None:
        """The window before the end of `path` is needed from now on (a lease or pin ends there):
        take its released pages off the released list, so no other end reclaims them while the
        holder still has to read them."""
        ps = self.page_size
        stop = sum(len(n.key) for n in path)
        low = max(0, stop - self.window_tokens)
        low -= low % ps
        for n in reversed(path):
            if stop <= low:
                break
            start = stop - len(n.key)
            if n.window is not None:
                self._hold(n, max(max(0, (low - start) // ps), n.wstart))
            stop = start

    # ------------------------------------------------------------------ insertion

    def _new_leaf_windows(self, leaf: Node) -> None:
        leaf.window = array("q", [_NO_PAGE]) * len(leaf.value)
        leaf.wstart = leaf.wheld = len(leaf.value)

    def _fill_windows(self, node: Node, end: int, write, low: int | None = None, evict: bool = True) -> None:
        """Hold the window part of every page covering [low, end) (default low: end - W) on the
        path that ends at `node` (depth `end`): released pages are taken back as they are,
        reclaimed ones get new window pages written from the request's row through
        `write(start, stop, None, pages)`. Deepest pages first: if window pages run out (after
        evicting other leaves when `evict`), the end keeps as much of its window as there is."""
        ps = self.page_size
        low = max(0, end - self.window_tokens if low is None else low)
        low -= low % ps
        todo = []
        stop, n = end, node
        while n.parent is not None and stop > low:
            start = stop - len(n.key)
            first = max(0, (low - start) // ps)
            if n.window is not None and first < n.wheld:
                self._hold(n, max(first, n.wstart))
                if first < n.wstart:
                    todo.append((n, start, first))
            stop, n = start, n.parent
        if not todo:
            return
        missing = sum(n.wstart - first for n, _start, first in todo)
        if evict and missing > len(self._window_free) + len(self._window_released):
            node.lock += 1  # keep the path alive while other leaves make room
            try:
                self._evict_for_windows(missing)
            finally:
                node.lock -= 1
        for n, start, first in todo:
            count = min(n.wstart - first, len(self._window_free) + len(self._window_released))
            if count <= 0:
                break
            ids = self._take_windows(count)
            top = n.wstart - count
            if write is not None:
                try:
                    write(start + top * ps, start + n.wstart * ps, None, ids)
                except BaseException:
                    give(self._window_free, ids)
                    raise
            n.window[top : n.wstart] = ids
            n.wstart = n.wheld = top  # `_hold` left wheld at the old wstart: all from `top` on is held now
            self.stats.window_written_pages += count

    def _hold(self, n: Node, index: int) -> None:
        """Pages [index, wheld) of `n` are needed again: off the released list."""
        released = self._window_released
        for page in n.window[index : n.wheld]:
            del released[page]
        n.wheld = min(n.wheld, index)

    def _take_windows(self, count: int) -> array:
        """`count` window pages: free ones first, then the oldest released ones (reclaimed)."""
        ids = take(self._window_free, min(count, len(self._window_free)))
        released = self._window_released
        while len(ids) < count:
            page, owner = released.popitem(last=False)
            # Released in position order per node, so the oldest is at the owner's `wstart`.
            owner.window[owner.wstart] = _NO_PAGE
            owner.wstart += 1
            ids.append(page)
            self.stats.window_reclaimed_pages += 1
        return ids

    def _evict_for_windows(self, target: int) -> None:
        while len(self._window_free) + len(self._window_released) < target:
            if not self._evict(1):
                return

    # ------------------------------------------------------------------ release

    def _release_windows(self, root: Node) -> None:
        """Release the window pages of every position under `root` that no hit-able end needs:
        a page of a node is needed while it reaches past (the smallest leaf or locked end at or
        below that node) - W."""
        window, ps = self.window_tokens, self.page_size
        order = []
        stack = [(root, 0)]
        while stack:
            n, start = stack.pop()
            stop = start + len(n.key)
            order.append((n, start, stop))
            for c in n.children.values():
                if c.value is not None:
                    stack.append((c, stop))
        nearest: dict[Node, int] = {}  # node -> smallest end at or below it that must stay hit-able
        released = self._window_released
        for n, start, stop in reversed(order):  # children before their parent
            below = [nearest[c] for c in n.children.values() if c.value is not None]
            end = min(below) if below else stop
            if n.lock > 0:
                end = min(end, stop)
            nearest[n] = end
            if n.window is None or n.parent is None:
                continue
            upto = min(len(n.window), (end - window - start) // ps) if end - window > start else 0
            if upto > n.wheld:
                for page in n.window[n.wheld : upto]:
                    released[page] = n
                self.stats.window_released_pages += upto - n.wheld
                n.wheld = upto

    def _drop_windows(self, node: Node) -> None:
        """An evicted node gives its window pages back."""
        if node.window is None:
            return
        released = self._window_released
        for page in node.window[node.wstart : node.wheld]:
            del released[page]
        give(self._window_free, node.window[node.wstart :])
        node.window = None
        node.wstart = node.wheld = 0

    def _split_windows(self, upper: Node, lower: Node, pages: int) -> None:
        """`lower` (holding `upper`'s pages too until now) is cut after `pages` pages."""
        if lower.window is None:
            return
        upper.window = lower.window[:pages]
        lower.window = lower.window[pages:]
        upper.wstart, upper.wheld = min(lower.wstart, pages), min(lower.wheld, pages)
        lower.wstart, lower.wheld = max(0, lower.wstart - pages), max(0, lower.wheld - pages)
        released = self._window_released
        for page in upper.window[upper.wstart : upper.wheld]:
            released[page] = upper  # same place in the release order, new owner
