"""Preallocated K/V storage for cached prefixes, addressed by page id.

One tensor holds every layer: `[layers, 2 (K, V), kv_heads, pages * page_size, head_dim]` on the
model's device, so moving a set of token positions in or out of the pool is a single
`index_select` / `index_copy_` for all layers at once (no per-layer Python loop on the hot path).
Page `p` owns slots `[p * page_size, (p + 1) * page_size)`.

The optional host tier is a second tensor of the same layout in CPU memory (pinned when the pool
is on a GPU) that receives pages the radix tree evicts, so they can come back without recompute.
Page bookkeeping (which pages are free, which prefix they hold) lives in `radix.RadixCache`; this
module only moves bytes.

Sliding-window mode (`window_layers` and `window_pages`): the pages hold only the full-attention
layers, and a second tensor of `window_pages` pages holds the sliding layers' K/V of the positions
some cached end still needs (see `radix_window`), so a long cached prefix costs the sliding layers
no more than their window.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Sequence

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
        window_layers: Sequence[int] = (),
        window_pages: int = 0,
    ) -> None:
        self.shape = shape
        self.page_size = page_size
        self.num_pages = num_pages
        self.device = torch.device(device)
        if window_pages and window_layers and host_pages:
            raise ValueError("sliding-window pages and the host tier cannot be combined")
        self.window_layers = sorted(set(window_layers)) if window_pages else []
        self.window_pages = window_pages if self.window_layers else 0
        self.full_layers = [i for i in range(shape.layers) if i not in set(self.window_layers)]
        slots = num_pages * page_size
        self.data = torch.zeros(len(self.full_layers), 2, shape.kv_heads, slots, shape.head_dim, dtype=shape.dtype,
                                device=self.device)
        self.window_data: torch.Tensor | None = None
        if self.window_layers:
            self.window_data = torch.zeros(len(self.window_layers), 2, shape.kv_heads, self.window_pages * page_size,
                                           shape.head_dim, dtype=shape.dtype, device=self.device)
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

    @property
    def windowed(self) -> bool:
        return self.window_data is not None

    def bytes_per_token(self, layers: Sequence[int]) -> int:
        s = self.shape
        return len(layers) * 2 * s.kv_heads * s.head_dim * self.data.element_size()

    def gather(self, pages: array, start: int, end: int) -> torch.Tensor:
        """K/V of positions [start, end) as `[layers, 2, kv_heads, end - start, head_dim]` (in
        sliding-window mode the full-attention layers only; the sliding layers stay zero)."""
        out = torch.zeros(
            (self.shape.layers, 2, self.shape.kv_heads, end - start, self.shape.head_dim),
            dtype=self.data.dtype,
            device=self.device,
        )
        self.read_into(pages, start, end, out)
        return out

    def read_into(self, pages: array, start: int, end: int, out: torch.Tensor) -> None:
        """Copy positions [start, end) into `out` (`[layers, 2, kv_heads, end - start, head_dim]`,
        e.g. a view of a sequence buffer), without an intermediate tensor when slots form runs. In
        sliding-window mode only the full-attention layers are copied (`read_window_into`)."""
        slots = self.slot_index(pages, start, end)
        if self.windowed:
            _gather_layers(self.data, slots, out, self.full_layers)
            return
        runs = _runs(slots)
        if runs is None:
            out.copy_(self.data.index_select(3, slots))
            return
        data = self.data
        for offset, first, length in runs:
            out[:, :, :, offset : offset + length] = data[:, :, :, first : first + length]

    def read_window_into(self, windows: array, start: int, end: int, out: torch.Tensor) -> None:
        """Copy the sliding layers' K/V of positions [start, end) from the window pages
        `windows` (which must hold every page of that range) into `out`, as `read_into`."""
        assert self.window_data is not None
        _gather_layers(self.window_data, self.slot_index(windows, start, end), out, self.window_layers)

    def write(self, pages: array | None, kv: torch.Tensor, windows: array | None = None) -> None:
        """Store `kv` (`[layers, 2, kv_heads, n * page_size, head_dim]`) into `pages`; in
        sliding-window mode the full-attention layers go to `pages` and the sliding layers to the
        window pages `windows` (either may be None: that part is not written)."""
        if not self.windowed:
            assert pages is not None
            slots = self.slot_index(pages, 0, len(pages) * self.page_size)
            runs = _runs(slots)
            if runs is None:
                self.data.index_copy_(3, slots, kv)
                return
            data = self.data
            for offset, first, length in runs:
                data[:, :, :, first : first + length] = kv[:, :, :, offset : offset + length]
            return
        if pages is not None:
            _scatter_layers(kv, self.full_layers, self.data, self.slot_index(pages, 0, len(pages) * self.page_size))
        if windows is not None:
            assert self.window_data is not None
            _scatter_layers(kv, self.window_layers, self.window_data,
                            self.slot_index(windows, 0, len(windows) * self.page_size))

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
        total = self.data.numel() * self.data.element_size()
        if self.window_data is not None:
            total += self.window_data.numel() * self.window_data.element_size()
        return total


def _gather_layers(src: torch.Tensor, slots: torch.Tensor, out: torch.Tensor, layers: list[int]) -> None:
    """out[layers[g]] <- src[g] at `slots`, for a pool tensor holding a subset of the layers."""
    runs = _runs(slots)
    for g, layer in enumerate(layers):
        if runs is None:
            out[layer].copy_(src[g].index_select(2, slots))
            continue
        for offset, first, length in runs:
            out[layer, :, :, offset : offset + length] = src[g, :, :, first : first + length]


def _scatter_layers(kv: torch.Tensor, layers: list[int], dst: torch.Tensor, slots: torch.Tensor) -> None:
    """dst[g] at `slots` <- kv[layers[g]]."""
    runs = _runs(slots)
    for g, layer in enumerate(layers):
        if runs is None:
            dst[g].index_copy_(2, slots, kv[layer])
            continue
        for offset, first, length in runs:
            dst[g, :, :, first : first + length] = kv[layer, :, :, offset : offset + length]
