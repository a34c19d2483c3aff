"""Model weights on transparent huge pages (Linux), for faster weight streaming in CPU decode.

A CPU decode step reads every weight once per token (Gemma 3 270M in float32: ~1.07 GB), in
~75 matrix-vector products. On 4 KiB pages that is ~260k pages a token: the TLB misses on every
page, and the weights evict from the TLB the entries that the ops between the products need.
On 2 MiB pages the same gigabyte is ~530 entries. Measured on this project's two-core machine
(`benchmarks/bench_engine.py`, and a sweep of single products in alternating processes): a
640 x 1024 product 13-19 -> 20-21 GB/s, 4096 x 640 17-19 -> 20-22, the 262k x 640 head
20-23 -> 22-26, a plain sum over 671 MB 18-20 -> 24-27 GB/s.

Most Linux systems ship transparent huge pages in `madvise` mode: only memory marked with
`madvise(MADV_HUGEPAGE)` gets them. PyTorch's CPU allocator marks its blocks only when the
`THP_MEM_ALLOC_ENABLE` variable is set before its first allocation, which a library cannot
arrange, and weights loaded from safetensors are mapped from the file, which never gets them. So
`move_to_huge_pages` copies each weight storage into one anonymous mapping marked for huge pages
and points the parameters at it (same values, same strides; the old storages are freed).
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import sys
import weakref
from collections.abc import Iterable
from pathlib import Path

import torch

HUGE_PAGE = 2 << 20
# Smaller storages (norm weights, biases) stay where they are: a few 4 KiB pages each.
MIN_BYTES = 64 << 10
_ALIGN = 64  # each storage starts on a cache line
_TRIM_EVERY = 256 << 20
_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")
# Live mappings made here, by address range: a storage inside one is not moved again.
_arenas: list[tuple[int, int]] = []


def enable_for_torch_allocations() -> None:
    """Ask PyTorch's CPU allocator to mark its blocks of 2 MiB and more for huge pages
    (`THP_MEM_ALLOC_ENABLE`), for what cannot be moved afterwards: MKL's and oneDNN's packed
    weight copies are opaque tensors, whose storage no view reaches. PyTorch reads the variable
    once, at its first CPU allocation, so this takes effect only in a process that has not
    allocated a tensor yet (the engine's modules call it on import); a value already set is
    kept. Measured on the 26M-parameter Llama, 4 sessions decoding together (steps on packed
    copies): 346-377 -> 392-399 tokens/s."""
    if huge_pages_available():
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


def huge_pages_available() -> bool:
    """Whether this system can back a mapping marked `MADV_HUGEPAGE` with huge pages."""
    if not sys.platform.startswith("linux") or not hasattr(mmap, "MADV_HUGEPAGE"):
        return False
    try:
        mode = _THP_MODE.read_text()
    except OSError:
        return False
    return "[never]" not in mode


def huge_page_block(nbytes: int) -> torch.Tensor:
    """A `uint8` tensor of `nbytes` on an anonymous mapping marked for huge pages, starting on a
    huge-page boundary (pages are committed when first written, not here)."""
    size = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
    mapping = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    base = torch.frombuffer(mapping, dtype=torch.uint8)  # holds `mapping` for as long as it lives
    skip = -base.data_ptr() % HUGE_PAGE
    mapping.madvise(mmap.MADV_HUGEPAGE, skip, size)
    block = base[skip : skip + nbytes]
    entry = (block.data_ptr(), block.data_ptr() + nbytes)
    _arenas.append(entry)
    # The mapping lives while any tensor views it; once it is unmapped, its addresses may be reused.
    weakref.finalize(mapping, _arenas.remove, entry)
    return block


def _in_arena(pointer: int) -> bool:
    return any(start <= pointer < end for start, end in _arenas)


def move_to_huge_pages(parameters: Iterable[torch.Tensor], min_bytes: int = MIN_BYTES) -> int:
    """Copy the CPU storages of `parameters` (at least `min_bytes` each) into one huge-page
    mapping and point every parameter sharing a storage at the copy, keeping its offset and
    strides (views such as a transposed weight, or projections that are slices of one
    concatenated matrix, stay views of one storage). Each old storage is freed once copied, if
    nothing else holds it. Returns the bytes moved; 0 where the system has no huge pages."""
    if not huge_pages_available():
        return 0
    # storage address -> (the storage, its parameters by identity)
    found: dict[int, tuple[torch.UntypedStorage, dict[int, torch.Tensor]]] = {}
    for param in parameters:
        if param.device.type != "cpu" or param.layout != torch.strided or param.is_quantized:
            continue
        storage = param.untyped_storage()
        key = storage.data_ptr()
        if storage.nbytes() >= min_bytes and not _in_arena(key):
            found.setdefault(key, (storage, {}))[1][id(param)] = param
    if not found:
        return 0
    sizes = [-(-storage.nbytes() // _ALIGN) * _ALIGN for storage, _ in found.values()]
    total = sum(sizes)
    arena = huge_page_block(total)
    start = freed = 0
    with torch.no_grad():
        for key, size in zip(list(found), sizes):
            storage, params = found.pop(key)  # the last reference here: freed after the copy
            nbytes = storage.nbytes()
            block = arena[start : start + nbytes]
            start += size
            block.copy_(torch.empty(0, dtype=torch.uint8).set_(storage))
            for param in params.values():
                typed = block.view(param.dtype)
                param.data = typed.as_strided(param.size(), param.stride(), typed.storage_offset() + param.storage_offset())
            del storage, params
            freed += nbytes
            if freed >= _TRIM_EVERY:  # so that at most this much is resident twice
                return_freed_memory()
                freed = 0
    return_freed_memory()
    return total


def return_freed_memory() -> None:
    """Hand freed memory back to the system. glibc keeps freed blocks of up to 32 MiB in its heap
    once a larger mapped block was freed (its mapping threshold adapts), so without this the old
    storages of the layers' weights stay resident (measured on Gemma 3 270M: +370 MiB)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """glibc's `malloc_trim` from the symbols already in the process, None on another libc."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
