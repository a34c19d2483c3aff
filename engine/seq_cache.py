"""A transformers `Cache` for one sequence, backed by a single preallocated buffer.

`DynamicCache` grows by `torch.cat`, which copies the whole past K/V of every layer at every
forward call: O(length) per decoded token. This cache writes new K/V in place into a buffer sized
for prompt + max_tokens and hands the attention a view of the filled part, so a decode step costs
only the new token's K/V. It also lets the runner fill positions [0, m) straight from the prefix
pool (or keep them from the previous request) before the model sees the cache.

Layout: `[layers, 2 (K, V), 1, kv_heads, capacity, head_dim]`, the same per-layer order as the
pool, so pool <-> buffer copies are one tensor op for all layers.

Sliding-window layers keep their full history here (the runner refuses nothing for them): the
model's own sliding mask, computed over absolute positions with offset 0, hides what lies outside
the window, so attention is exactly what the model computes without a cache.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class _BufferLayer(DynamicLayer):
    """One layer's view into the shared buffer; lengths are per layer, like `DynamicCache`."""

    def __init__(self, owner: "SequenceCache", index: int, sliding: bool) -> None:
        super().__init__()
        self.owner = owner
        self.index = index
        self.is_sliding = sliding
        self.length = 0
        self.is_initialized = True
        self._refresh()

    def _refresh(self) -> None:
        buf = self.owner.buffer
        self.keys = buf[self.index, 0, :, :, : self.length]
        self.values = buf[self.index, 1, :, :, : self.length]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        return None  # the buffer is allocated up front

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        start = self.length
        end = start + key_states.shape[-2]
        if end > self.owner.capacity:
            self.owner.grow(end)
        buf = self.owner.buffer
        buf[self.index, 0, :, :, start:end] = key_states
        buf[self.index, 1, :, :, start:end] = value_states
        self.length = end
        self._refresh()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_max_length(self) -> int:
        return -1

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative number of tokens to remove")
        self.length = max(0, self.length + tokens_to_remove)
        self._refresh()

    def reset(self) -> None:
        self.length = 0
        self._refresh()


class SequenceCache(Cache):
    """K/V of one sequence for every layer, grown in place."""

    def __init__(
        self,
        *,
        layers: int,
        kv_heads: int,
        head_dim: int,
        capacity: int,
        dtype: torch.dtype,
        device: torch.device,
        sliding: list[bool] | None = None,
    ) -> None:
        self.capacity = max(1, capacity)
        self.buffer = torch.empty(layers, 2, 1, kv_heads, self.capacity, head_dim, dtype=dtype, device=device)
        flags = sliding or [False] * layers
        super().__init__(layers=[_BufferLayer(self, i, flags[i]) for i in range(layers)])

    @property
    def length(self) -> int:
        """Tokens held by every layer (the layers only differ in the middle of a forward pass)."""
        return min(layer.length for layer in self.layers)

    def grow(self, needed: int) -> None:
        new_capacity = max(needed, self.capacity * 2)
        shape = list(self.buffer.shape)
        shape[4] = new_capacity
        bigger = torch.empty(shape, dtype=self.buffer.dtype, device=self.buffer.device)
        bigger[:, :, :, :, : self.capacity] = self.buffer
        self.buffer = bigger
        self.capacity = new_capacity
        for layer in self.layers:
            layer._refresh()

    def ensure_capacity(self, needed: int) -> None:
        if needed > self.capacity:
            self.grow(needed)

    def truncate(self, length: int) -> None:
        """Keep positions [0, length) of every layer."""
        for layer in self.layers:
            layer.length = min(layer.length, length)
            layer._refresh()

    def load(self, start: int, kv: torch.Tensor) -> None:
        """Place `kv` (`[layers, 2, kv_heads, n, head_dim]`, e.g. gathered from the pool) at
        positions [start, start + n); every layer then holds start + n tokens."""
        end = start + kv.shape[3]
        self.ensure_capacity(end)
        self.buffer[:, :, 0, :, start:end] = kv
        for layer in self.layers:
            layer.length = end
            layer._refresh()

    def load_from(self, pool, pages, start: int, end: int) -> None:
        """Copy positions [start, end) of a cached prefix from `pool` (a `KVPool`) straight into
        the buffer; every layer then holds `end` tokens."""
        self.ensure_capacity(end)
        pool.read_into(pages, start, end, self.buffer[:, :, 0, :, start:end])
        for layer in self.layers:
            layer.length = end
            layer._refresh()

    def kv_slice(self, start: int, end: int) -> torch.Tensor:
        """`[layers, 2, kv_heads, end - start, head_dim]` view of positions [start, end)."""
        return self.buffer[:, :, 0, :, start:end]
