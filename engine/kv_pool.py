"""Preallocated K/V storage for cached prefixes, addressed by page id.

One tensor holds every layer: `[layers, 2 (K, V), kv_heads, pages * page_size, head_dim]` on the
model's device, so moving a set of token positions in or out of the pool is a single
`index_select` / `index_copy_` for all layers at once (no per-layer Python loop on the hot path).
Page `p` owns slots `[p * page_size, (p + 1) * page_size)`.

The optional host tier is a second tensor of the same layout in CPU memory (pinned when the pool
is on a GPU) that receives pages the radix tree evicts, so they can come back without recompute.
Page bookkeeping (which pages are free, which prefix they hold) lives in `radix.RadixCache`; this
module only moves bytes.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KVShape:
    layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype

    @property
    def bytes_per_token(self) -> int:
        return self.layers * 2 * self.kv_heads * self.head_dim * torch.empty((), dtype=self.dtype).element_size()


def _as_index(pages: array, device: torch.device) -> torch.Tensor:
    # array('q') exposes the buffer protocol: zero-copy view as int64, then one transfer if needed.
    index = torch.frombuffer(pages, dtype=torch.int64) if len(pages) else torch.empty(0, dtype=torch.int64)
    return index.to(device, non_blocking=True) if device.type != "cpu" else index


class KVPool:
    """Device pages plus an optional host tier, with O(1)-per-page copies in and out."""

    def __init__(
        self,
        shape: KVShape,
        *,
        num_pages: int,
        page_size: int,
        device: torch.device | str,
        host_pages: int = 0,
    ) -> None:
        self.shape = shape
        self.page_size = page_size
        self.num_pages = num_pages
        self.device = torch.device(device)
        slots = num_pages * page_size
        self.data = torch.zeros(shape.layers, 2, shape.kv_heads, slots, shape.head_dim, dtype=shape.dtype, device=self.device)
        self.host_pages = host_pages
        self.host: torch.Tensor | None = None
        if host_pages:
            self.host = torch.zeros(
                shape.layers,
                2,
                shape.kv_heads,
                host_pages * page_size,
                shape.head_dim,
                dtype=shape.dtype,
                pin_memory=self.device.type == "cuda",
            )
        self._offsets = torch.arange(page_size, dtype=torch.int64, device=self.device)

    def slot_index(self, pages: array, start: int, end: int) -> torch.Tensor:
        """Slots holding token positions [start, end) of a sequence whose page list is `pages`
        (pages[i] holds positions [i * page_size, (i + 1) * page_size))."""
        ps = self.page_size
        first, last = start // ps, -(-end // ps)
        index = _as_index(pages[first:last], self.device)
        if ps == 1:
            return index
        slots = (index[:, None] * ps + self._offsets).reshape(-1)
        return slots[start - first * ps : end - first * ps]

    def gather(self, pages: array, start: int, end: int) -> torch.Tensor:
        """K/V of positions [start, end) as `[layers, 2, kv_heads, end - start, head_dim]`."""
        return self.data.index_select(3, self.slot_index(pages, start, end))

    def write(self, pages: array, kv: torch.Tensor) -> None:
        """Store `kv` (`[layers, 2, kv_heads, len(pages) * page_size, head_dim]`) into `pages`."""
        self.data.index_copy_(3, self.slot_index(pages, 0, len(pages) * self.page_size), kv)

    def offload(self, device_pages: array, host_pages: array) -> None:
        """Copy device pages to host pages (radix-tree eviction into the host tier)."""
        assert self.host is not None
        n = len(device_pages) * self.page_size
        src = self.data.index_select(3, self.slot_index(device_pages, 0, n))
        dst = self._host_slots(host_pages)
        self.host.index_copy_(3, dst, src.to("cpu"))

    def reload(self, host_pages: array, device_pages: array) -> None:
        """Copy host pages back into device pages (a host-tier hit)."""
        assert self.host is not None
        src = self.host.index_select(3, self._host_slots(host_pages))
        n = len(device_pages) * self.page_size
        self.data.index_copy_(3, self.slot_index(device_pages, 0, n), src.to(self.device, non_blocking=True))

    def _host_slots(self, host_pages: array) -> torch.Tensor:
        index = _as_index(host_pages[:], torch.device("cpu"))  # a copy: never export the caller's array
        ps = self.page_size
        if ps == 1:
            return index
        return (index[:, None] * ps + torch.arange(ps)).reshape(-1)

    @property
    def device_bytes(self) -> int:
        return self.data.numel() * self.data.element_size()
