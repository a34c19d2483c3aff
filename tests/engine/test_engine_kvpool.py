"""KV pool: page addressing, gather / write round trips, host-tier offload and reload."""

from __future__ import annotations

from array import array

import torch

from hitrate.engine.kv_pool import KVPool, KVShape
from hitrate.engine.seq_cache import SequenceCache

SHAPE = KVShape(layers=2, kv_heads=3, head_dim=4, dtype=torch.float32)


def kv(n: int, seed: int) -> torch.Tensor:
    return torch.randn(SHAPE.layers, 2, SHAPE.kv_heads, n, SHAPE.head_dim, generator=torch.Generator().manual_seed(seed))


def test_write_then_gather_any_token_range_across_pages():
    pool = KVPool(SHAPE, num_pages=10, page_size=3, device="cpu")
    pages = array("q", [7, 2, 5])  # deliberately out of order
    data = kv(9, 0)
    pool.write(pages, data)
    assert torch.equal(pool.gather(pages, 0, 9), data)
    assert torch.equal(pool.gather(pages, 4, 8), data[:, :, :, 4:8])  # starts and ends mid-page
    assert torch.equal(pool.slot_index(pages, 2, 4), torch.tensor([23, 6]))
    assert SHAPE.bytes_per_token == 2 * 2 * 3 * 4 * 4


def test_host_tier_round_trip_preserves_values():
    pool = KVPool(SHAPE, num_pages=4, page_size=2, device="cpu", host_pages=4)
    data = kv(4, 1)
    pool.write(array("q", [0, 1]), data)
    pool.offload(array("q", [0, 1]), array("q", [3, 2]))
    pool.data.zero_()
    pool.reload(array("q", [3, 2]), array("q", [2, 3]))
    assert torch.equal(pool.gather(array("q", [2, 3]), 0, 4), data)


def test_sequence_cache_grows_in_place_and_loads_from_the_pool():
    cache = SequenceCache(layers=2, kv_heads=3, head_dim=4, capacity=2, dtype=torch.float32, device=torch.device("cpu"))
    data = kv(5, 2)
    cache.load(0, data[:, :, :, :3])
    assert cache.length == 3 and cache.capacity >= 3
    for layer in range(2):
        keys, values = cache.layers[layer].update(data[layer, 0, :, 3:5][None], data[layer, 1, :, 3:5][None])
        assert keys.shape == (1, 3, 5, 4)
    assert torch.equal(cache.kv_slice(0, 5), data)
    cache.truncate(2)
    assert cache.get_seq_length() == 2 and torch.equal(cache.kv_slice(0, 2), data[:, :, :, :2])
