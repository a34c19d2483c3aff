"""Plain data of the radix prefix index: nodes, leases, statistics, free-stack and token-run
helpers. Kept apart from the tree logic in `radix` and `radix_host`."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Callable

PageHook = Callable[[array, array], None]  # (source page ids, destination page ids)
WriteHook = Callable[[int, int, array], None]  # (start token, end token, page ids to fill)


class Node:
    """One edge of the tree (the token run from its parent) and the pages that hold its K/V."""

    __slots__ = ("key", "value", "host", "children", "parent", "ckey", "lock", "atime", "uid", "pinned_below",
                 "window", "wstart", "wheld")

    def __init__(self, key: list, value: array | None, parent: "Node | None", ckey, uid: int) -> None:
        self.key = key  # token ids of the edge from parent to this node
        self.value = value  # device page ids (len(key) // page_size), None when only on host
        self.host: array | None = None  # host page ids while offloaded
        self.children: dict = {}
        self.parent = parent
        self.ckey = ckey  # this node's key in parent.children
        self.lock = 0
        self.atime = 0
        self.uid = uid
        self.pinned_below = 0  # live pins ending at this node or below it (its pages are pinned if > 0)
        # Sliding-window mode (`radix_window`): per page, the window page holding the sliding layers'
        # K/V, or -1. [0, wstart) are -1 (reclaimed), [wstart, wheld) released but still valid
        # (reclaimable), [wheld, len) held.
        self.window: array | None = None
        self.wstart = 0
        self.wheld = 0


class Lease:
    """A request's hold on its matched prefix. `pages` covers tokens [0, matched)."""

    __slots__ = ("node", "matched", "pages", "windows", "salt", "reloaded", "done")

    def __init__(self, node: Node, matched: int, pages: array, salt: str, reloaded: int,
                 windows: array | None = None) -> None:
        self.node = node
        self.matched = matched
        self.pages = pages
        self.windows = windows  # window page per page of `pages` (sliding-window mode), -1 if released
        self.salt = salt
        self.reloaded = reloaded  # tokens of the match brought back from the host tier
        self.done = False


@dataclass
class RadixStats:
    queries: int = 0  # requests that called begin
    query_tokens: int = 0
    hit_tokens: int = 0  # tokens served from cache (device + host tier)
    host_hit_tokens: int = 0  # of which brought back from the host tier
    inserted_tokens: int = 0
    evicted_pages: int = 0  # device pages freed by eviction
    offloaded_pages: int = 0  # of which copied to the host tier
    host_evicted_pages: int = 0
    pinned_skipped: int = 0  # pin requests refused because pins would hold too much of the pool
    window_released_pages: int = 0  # sliding-layer pages no cached end needs (reclaimable, still hit-able)
    window_reclaimed_pages: int = 0  # of which reused for other positions (no longer hit-able)
    window_written_pages: int = 0  # sliding-layer pages written for the window of a new end
    window_shortened_hits: int = 0  # matches cut back to an end whose window is still cached


def take(stack: array, n: int) -> array:
    """Pop n page ids off a free stack, in ascending order when they were freed as a run."""
    pages = stack[-n:]
    del stack[-n:]
    pages.reverse()
    return pages


def give(stack: array, pages: array) -> None:
    stack.extend(pages[::-1])


def common_prefix_from(key: list, tokens: list, start: int) -> int:
    """Length of the common prefix of `key` and `tokens[start:]` using slice comparisons."""
    n = min(len(key), len(tokens) - start)
    lo, step = 0, 16
    while lo < n:
        hi = min(lo + step, n)
        if key[lo:hi] != tokens[start + lo : start + hi]:
            while hi - lo > 8:
                mid = (lo + hi) >> 1
                if key[lo:mid] == tokens[start + lo : start + mid]:
                    lo = mid
                else:
                    hi = mid
            while lo < hi and key[lo] == tokens[start + lo]:
                lo += 1
            return lo
        lo = hi
        step <<= 1
    return n


def common_prefix_length(a: list, b: list) -> int:
    """Length of the longest common prefix of two token lists (slice comparisons, no Python loop
    over long equal runs)."""
    if len(a) > len(b):
        a, b = b, a
    return common_prefix_from(a, b, 0)
