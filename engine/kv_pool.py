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
    # array('q') exposes the buffer protocol: zero-copy view as int64, then one transfer if needed
    # (blocking: the host memory belongs to a temporary array).
    index = torch.frombuffer(pages, dtype=torch.int64) if len(pages) else torch.empty(0, dtype=torch.int64)
    return index.to(device) if device.type != "cpu" else index


# Above this many runs of consecutive slots, one gather op beats a Python loop of slice copies.
_MAX_RUNS = 64


def _runs(slots: torch.Tensor) -> list[tuple[int, int, int]] | None:
    """Split a slot index into runs of consecutive slots: (offset in the sequence, first slot,
    length). On CPU, `index_select` along the slot dimension moves one head_dim row at a time and
    is several times slower than slice copies; the radix tree hands out pages in ascending runs,
    so a cached prefix is usually a handful of runs. None when the index is too fragmented."""
    n = slots.numel()
    if n == 0:
        return []
    breaks = torch.nonzero(slots[1:] - slots[:-1] != 1).flatten()
    if breaks.numel() >= _MAX_RUNS:
        return None
    bounds = [0] + (breaks + 1).tolist() + [n]
    firsts = slots[bounds[:-1]].tolist()
    return [(a, first, b - a) for a, b, first in zip(bounds[:-1], bounds[1:], firsts)]


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
        out = torch.empty(
            (self.shape.layers, 2, self.shape.kv_heads, end - start, self.shape.head_dim),
            dtype=self.data.dtype,
            device=self.device,
        )
        self.read_into(pages, start, end, out)
        return out

    def read_into(self, pages: array, start: int, end: int, out: torch.Tensor) -> None:
        """Copy positions [start, end) into `out` (`[layers, 2, kv_heads, end - start, head_dim]`,
        e.g. a view of a sequence buffer), without an intermediate tensor when slots form runs."""
        slots = self.slot_index(pages, start, end)
        runs = _runs(slots)
        if runs is None:
            out.copy_(self.data.index_select(3, slots))
            return
        data = self.data
        for offset, first, length in runs:
            out[:, :, :, offset : offset + length] = data[:, :, :, first : first + length]

    def write(self, pages: array, kv: torch.Tensor) -> None:
        """Store `kv` (`[layers, 2, kv_heads, len(pages) * page_size, head_dim]`) into `pages`."""
        slots = self.slot_index(pages, 0, len(pages) * self.page_size)
        runs = _runs(slots)
        if runs is None:
            self.data.index_copy_(3, slots, kv)
            return
        data = self.data
        for offset, first, length in runs:
            data[:, :, :, first : first + length] = kv[:, :, :, offset : offset + length]

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
