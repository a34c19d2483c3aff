"""K/V of every running sequence in one buffer, one row per sequence, for batched decoding.

Layout: `[layers, 2 (K, V), rows, kv_heads, capacity, head_dim]`. Row `r` holds one sequence's
positions [0, lengths[r]) exactly as a lone `SequenceCache` would (same per-layer order as the KV
pool, so pool <-> row copies are one tensor op for all layers).

Two transformers `Cache` views over it:
- `RowCache`: one row at batch size 1, appending in place (prefill chunks; decode when batching
  is off). The model builds its own causal / sliding mask, as for a lone sequence. One object per
  row is kept and re-synced, so a decode step does not rebuild a cache object per layer.
- `DecodeCache`: rows [0, n) at once, one new token each, written at each row's own position. Rows
  differ in length, so the runner passes the model a prepared 4D mask (`decode_masks`): row b's
  query at position p_b sees keys [0, p_b], and on a sliding layer only keys with index > p_b - w
  (transformers' `sliding_window_overlay` rule), which is exactly the mask of a lone sequence.
  Positions past a row's length are never attended, so stale K/V there is harmless.

Sliding layers hand attention only the keys a query of this forward can see: from
`max(0, first query position - w + 1)` on, with that offset reported through `get_mask_sizes`
the way transformers' own `DynamicSlidingWindowLayer` reports it. The keys left out were masked
anyway, so the result is the same, but a decode step at a long context reads and scores `w` keys
on those layers instead of the whole history (Gemma 3: 15 of its 18 layers, window 512).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer

from hitrate.engine.kv_pool import KVShape

# Mask formats by attention implementation: SDPA (and flex's eager fallback) take a boolean
# "may attend" mask; eager attention adds the mask to the scores, so it needs 0 / -inf-like floats.
BOOL_MASK_IMPLEMENTATIONS = {"sdpa"}
ADDITIVE_MASK_IMPLEMENTATIONS = {"eager"}


class BatchKV:
    def __init__(
        self,
        shape: KVShape,
        *,
        rows: int,
        capacity: int,
        device: torch.device,
        layer_types: list[str],
        windows: list[int | None],
    ) -> None:
        self.shape = shape
        self.rows = rows
        self.capacity = max(1, capacity)
        self.device = device
        self.layer_types = layer_types
        self.windows = windows
        self.slice_windows = sliding_slice_windows(layer_types, windows)
        # Zeros, never `empty`: a batched step multiplies the padding positions of short rows by
        # attention weights of exactly 0, which is exact for any finite value but NaN for the NaN /
        # inf bit patterns uninitialised memory can hold.
        self.buffer = torch.zeros(
            shape.layers, 2, rows, shape.kv_heads, self.capacity, shape.head_dim, dtype=shape.dtype, device=device
        )
        self.generation = 0  # bumped whenever `buffer` is replaced: cached views must be re-taken
        self.lengths = [0] * rows
        self._positions = torch.arange(self.capacity, device=device)
        self._row_caches: dict[int, RowCache] = {}
        self._views: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    # ------------------------------------------------------------------ storage

    def ensure_capacity(self, needed: int) -> None:
        """Grow every row to hold `needed` positions (doubling, so growth is rare)."""
        if needed <= self.capacity:
            return
        new_capacity = max(needed, self.capacity * 2)
        shape = list(self.buffer.shape)
        shape[4] = new_capacity
        bigger = torch.zeros(shape, dtype=self.buffer.dtype, device=self.buffer.device)
        bigger[..., : self.capacity, :] = self.buffer
        self._replace_buffer(bigger)
        self.capacity = new_capacity
        self._positions = torch.arange(new_capacity, device=self.device)

    def ensure_rows(self, needed: int) -> None:
        """Hold at least `needed` rows (doubling). Rows are added as concurrency grows, so a lone
        session does not pay for the K/V of a full batch at its context length."""
        if needed <= self.rows:
            return
        new_rows = max(needed, self.rows * 2)
        shape = list(self.buffer.shape)
        shape[2] = new_rows
        bigger = torch.zeros(shape, dtype=self.buffer.dtype, device=self.buffer.device)
        bigger[:, :, : self.rows] = self.buffer
        self._replace_buffer(bigger)
        self.lengths += [0] * (new_rows - self.rows)
        self.rows = new_rows

    def _replace_buffer(self, bigger: torch.Tensor) -> None:
        self.buffer = bigger
        self.generation += 1
        self._views = None  # they would hold the old buffer

    def layer_views(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, (K, V) views `[rows, kv_heads, capacity, head_dim]` of the buffer, taken once
        per buffer (a decode step indexes them ~4 times a layer)."""
        if self._views is None:
            self._views = [(layer[0], layer[1]) for layer in self.buffer]
        return self._views

    def truncate(self, row: int, length: int) -> None:
        self.lengths[row] = min(self.lengths[row], length)

    def load_from(self, pool, pages, row: int, start: int, end: int, windows=None, window_start: int | None = None) -> None:
        """Copy positions [start, end) of a cached prefix from `pool` into `row`; the row then holds
        `end` tokens. A pool in sliding-window mode copies its sliding layers from `window_start`
        on instead (from the window pages `windows`): earlier positions of those layers are
        never attended again."""
        self.ensure_capacity(end)
        if start < end:
            pool.read_into(pages, start, end, self.buffer[:, :, row, :, start:end])
        if pool.windowed and window_start is not None and window_start < end:
            pool.read_window_into(windows, window_start, end, self.buffer[:, :, row, :, window_start:end])
        self.lengths[row] = end

    def prefill_rows(self, model, sequences: list[list[int]]) -> None:
        """Rows [0, len(sequences)) hold each sequence's K/V, computed by `model`'s own forward
        (the load-time checks start from this)."""
        for row, ids in enumerate(sequences):
            cache = self.row_cache(row)
            model(input_ids=torch.tensor([ids], device=self.device), cache=cache, use_cache=True)
            cache.commit()

    def kv_slice(self, row: int, start: int, end: int) -> torch.Tensor:
        """`[layers, 2, kv_heads, end - start, head_dim]` view of a row's positions [start, end)."""
        return self.buffer[:, :, row, :, start:end]

    @property
    def bytes_per_row_token(self) -> int:
        return self.shape.bytes_per_token

    # ------------------------------------------------------------------ cache views

    def row_cache(self, row: int) -> "RowCache":
        """The row's batch-1 cache, synced to `lengths[row]` (one object per row, reused)."""
        cache = self._row_caches.get(row)
        if cache is None:
            cache = self._row_caches[row] = RowCache(self, row)
        else:
            cache.sync()
        return cache

    def decode_cache(self, n: int) -> "DecodeCache":
        """A cache over rows [0, n) for one decode step; call `ensure_capacity` first."""
        return DecodeCache(self, n)

    def decode_masks(self, positions: torch.Tensor, implementation: str):
        """The 4D masks (`[n, 1, 1, kv_len]`) of one decode step whose queries sit at `positions`
        (`[n]`): a tensor when every layer is full attention, else a dict by layer type, which the
        models that mix layer types accept in place of the mask they would build. A sliding
        layer's mask starts at the same offset as the keys its `DecodeCache` layer returns."""
        low, high = _bounds(positions)
        kv_len = high + 1
        keys = self._positions[:kv_len][None, :]
        query = positions[:, None]
        causal = keys <= query
        masks = {"full_attention": causal}
        for kind, window in zip(self.layer_types, self.windows):
            if kind == "sliding_attention" and kind not in masks:
                allowed = causal & (keys > query - int(window))
                masks[kind] = allowed[:, window_offset(low, self.slice_windows.get(kind)) :]
        formatted = {kind: self._format(m, implementation)[:, None, None, :] for kind, m in masks.items()}
        if set(self.layer_types) <= {"full_attention"}:
            return formatted["full_attention"]
        return formatted

    def _format(self, allowed: torch.Tensor, implementation: str) -> torch.Tensor:
        if implementation in BOOL_MASK_IMPLEMENTATIONS:
            return allowed
        zero = torch.zeros((), dtype=self.shape.dtype, device=self.device)
        low = torch.tensor(torch.finfo(self.shape.dtype).min, dtype=self.shape.dtype, device=self.device)
        return torch.where(allowed, zero, low)


def sliding_slice_windows(layer_types: list[str], windows: list[int | None]) -> dict[str, int]:
    """Layer type -> window for the types whose keys are cut to the window: "sliding_attention"
    when every such layer states one and the same window (the masks are built per layer type,
    so one window per type is what the offset can follow)."""
    sizes = {w for t, w in zip(layer_types, windows) if t == "sliding_attention"}
    if len(sizes) == 1 and None not in sizes:
        (window,) = sizes
        if isinstance(window, int) and window > 0:
            return {"sliding_attention": window}
    return {}


def window_offset(first_query: int, window: int | None) -> int:
    """First key position a query at `first_query` (or later) can see through a `window`-token
    sliding window (keys with index > position - window), 0 for full attention."""
    return 0 if window is None else max(0, first_query - window + 1)


def _bounds(positions: torch.Tensor) -> tuple[int, int]:
    values = positions.tolist()  # one transfer for both ends
    return min(values), max(values)


def batching_supported(implementation: str, layer_types: list[str], windows: list[int | None]) -> str | None:
    """None when decode steps can be batched with prepared masks, else the reason they cannot."""
    if implementation not in BOOL_MASK_IMPLEMENTATIONS | ADDITIVE_MASK_IMPLEMENTATIONS:
        return f"attention implementation {implementation!r} takes no prepared 4D mask"
    odd = sorted({t for t in layer_types if t not in ("full_attention", "sliding_attention")})
    if odd:
        return f"layer types {odd} need masks this engine does not build"
    if any(t == "sliding_attention" and not w for t, w in zip(layer_types, windows)):
        return "a sliding layer states no window size"
    return None


class _RowLayer(DynamicLayer):
    """One layer of one row; lengths are per layer during a forward pass, like `DynamicCache`."""

    def __init__(self, owner: BatchKV, index: int, row: int, length: int, sliding: bool, window: int | None) -> None:
        super().__init__()
        self.owner = owner
        self.index = index
        self.row = row
        self.length = length
        self.is_sliding = sliding
        self.window = window  # keys before the window are not handed to attention
        self.is_initialized = True
        self._generation = -1
        self._k = self._v = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        return None

    def _bind(self) -> None:
        # `[1, kv_heads, capacity, head_dim]` views of this row and layer, taken once per buffer.
        buf = self.owner.buffer
        r = self.row
        self._k = buf[self.index, 0, r : r + 1]
        self._v = buf[self.index, 1, r : r + 1]
        self._generation = self.owner.generation

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        start = self.length
        end = start + key_states.shape[-2]
        owner = self.owner
        owner.ensure_capacity(end)
        if self._generation != owner.generation:
            self._bind()
        k, v = self._k, self._v
        k[:, :, start:end] = key_states
        v[:, :, start:end] = value_states
        self.length = end
        first = window_offset(start, self.window)
        return k[:, :, first:end], v[:, :, first:end]

    def get_seq_length(self) -> int:
        return self.length

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        first = window_offset(self.length, self.window)
        return self.length + query_length - first, first

    def get_max_length(self) -> int:
        return -1


class RowCache(Cache):
    """Row `row` of a `BatchKV` as a batch-1 cache; `commit()` records the new length."""

    def __init__(self, owner: BatchKV, row: int) -> None:
        self.owner = owner
        self.row = row
        length = owner.lengths[row]
        windows = owner.slice_windows
        super().__init__(layers=[
            _RowLayer(owner, i, row, length, t != "full_attention", windows.get(t))
            for i, t in enumerate(owner.layer_types)
        ])

    def sync(self) -> None:
        """Take the row's length again (another cache view may have moved it)."""
        length = self.owner.lengths[self.row]
        for layer in self.layers:
            layer.length = length

    def commit(self) -> None:
        self.owner.lengths[self.row] = min(layer.length for layer in self.layers)


class _DecodeLayer(DynamicLayer):
    def __init__(self, cache: "DecodeCache", index: int, sliding: bool, first: int) -> None:
        super().__init__()
        self.cache = cache
        self.index = index
        self.is_sliding = sliding
        self.first = first  # first key position handed to attention (see `decode_masks`)
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        return None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        c = self.cache
        buf = c.owner.buffer
        # key_states: [n, kv_heads, 1, head_dim]; each row's token goes to that row's own position.
        buf[self.index, 0, c.row_index, :, c.positions] = key_states[:, :, 0, :]
        buf[self.index, 1, c.row_index, :, c.positions] = value_states[:, :, 0, :]
        first = self.first
        return buf[self.index, 0, : c.n, :, first : c.kv_len], buf[self.index, 1, : c.n, :, first : c.kv_len]

    def get_seq_length(self) -> int:
        return self.cache.kv_len - 1

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.cache.kv_len - self.first, self.first

    def get_max_length(self) -> int:
        return -1


class DecodeCache(Cache):
    """Rows [0, n) of a `BatchKV` for one decode step (one new token per row)."""

    def __init__(self, owner: BatchKV, n: int) -> None:
        self.owner = owner
        self.n = n
        lengths = owner.lengths[:n]
        self.positions = torch.tensor(lengths, dtype=torch.long, device=owner.device)
        self.row_index = torch.arange(n, device=owner.device)
        self.kv_len = max(lengths) + 1
        low = min(lengths)
        windows = owner.slice_windows
        super().__init__(layers=[
            _DecodeLayer(self, i, t != "full_attention", window_offset(low, windows.get(t)))
            for i, t in enumerate(owner.layer_types)
        ])

    def commit(self, rows: list[int]) -> None:
        """The step's token is now part of each of `rows` (the others were padding)."""
        for r in rows:
            self.owner.lengths[r] += 1
