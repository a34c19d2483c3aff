"""The fastest weight layout for decode steps of each row count, chosen by timing steps at load.

Which layout multiplies a handful of rows by a weight matrix fastest depends on the CPU and the
BLAS build, not on the model. Measured on two cores, float32, the 26M-parameter Llama's whole
decode step in ms:

- an Intel AVX-512 machine: MKL on the weights as stored (`[in, out]`) at 1 row; row-major
  copies at 2 and 3 rows; MKL's packed copies from 4 rows (4 rows 9.5 instead of 11.3);
- an AMD EPYC (Zen 4) machine: oneDNN copies reordered for 8 rows at every row count (1 row
  7.0 against 10.5, 4 rows 8.6 against 16.0 as stored, 24 on MKL's packed copies, 22 on
  row-major ones, where row-major copies were the slowest at 2 and 3 rows); with the engine's
  own kernel (`engine.native_gemv`), that kernel at every row count (1 row 5.2 against oneDNN's
  8.1, 4 rows 5.4 against 7.0, 8 rows 7.3 against 8.2).

So nothing is assumed: `tune` builds the candidate copies that fit the budget
(`engine.cpu_linear`), times whole decode steps of every row count up to the batch limit on each
(interleaved rounds, the fastest round of each counts, so a noisy machine hits all alike), keeps
the fastest for each row count (or, within `NEAR_FASTEST`, the layout most row counts chose) and lets
the other copies go. Whole steps, not single products: a product timed alone finds its weights
in the caches, which a step that streams the whole model does not.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from hitrate.engine import cpu_linear, huge_pages
from hitrate.engine.batch_kv import BatchKV

Product = Callable[[torch.Tensor], torch.Tensor]
AS_STORED = "as stored"
GEMV_KERNEL = "GEMV kernel"  # `engine.native_gemv`
ONEDNN = "oneDNN"
# oneDNN copies are reordered for this many rows and serve every row count; 4 and 8 measured
# alike from 2 to 8 rows, 1 (what oneDNN's own default assumes) up to 2.3x slower from 2 rows.
ONEDNN_BATCH_HINT = 8
# K/V positions each row holds while steps are timed: attention is the same on every layout.
_CONTEXT = 32
# Layouts whose first two timed steps took more than this many times the fastest's are not timed on.
_PRUNE = 2.0
# A row count whose fastest layout beats the layout most row counts chose by less than this
# factor runs on that one too: one copy fewer to keep, and no choice flipped by noise.
NEAR_FASTEST = 1.1


@dataclass
class Candidate:
    """Weight copies a step may run on: `products[id(module)]` for the modules it copies."""

    name: str
    products: dict[int, Product]
    nbytes: int
    rows: frozenset[int] | None = None  # the only row counts it computes (MKL's packed copies)

    def serves(self, rows: int) -> bool:
        return self.rows is None or rows in self.rows


@dataclass
class Tuning:
    """What `tune` chose: the layout by row count, each candidate's fastest step in ms, and the
    bytes of the copies kept."""

    chosen: dict[int, str] = field(default_factory=dict)
    # a layout left out after its first timed step (`_PRUNE`): that step's time
    step_ms: dict[int, dict[str, float]] = field(default_factory=dict)
    nbytes: int = 0

    @property
    def steps_use_model_copies(self) -> bool:
        """Whether some row count's steps run on the model's own oneDNN copies (`ONEDNN` reuses
        a `PackedLinear`'s; the weights as stored call it); False when nothing was tuned."""
        return not self.chosen or any(name in (ONEDNN, AS_STORED) for name in self.chosen.values())


def candidates(modules: list[nn.Module], max_batch: int, budget_bytes: int) -> list[Candidate]:
    """The weight copies that fit `budget_bytes` in all, most broadly useful first: the engine's
    own kernel's (any row count; float32 or bfloat16 weights), oneDNN's (any), row-major (any),
    then MKL's packed copies for the powers of two from `max_batch` down to 4 (each for its own
    row count; these three float32 only). Each copy is checked against its linear in
    `engine.cpu_linear`."""
    found: list[Candidate] = []
    linears = [m for m in modules if isinstance(m, nn.Linear)]

    def add(name: str, covered: list[nn.Module], products: list[Product], nbytes: int, rows=None) -> None:
        nonlocal budget_bytes
        if products:
            found.append(Candidate(name, {id(m): p for m, p in zip(covered, products)}, nbytes, rows))
            budget_bytes -= nbytes

    add(GEMV_KERNEL, linears, *cpu_linear.packed_gemv_products(linears, budget_bytes))
    add(ONEDNN, linears, *cpu_linear.onednn_products(linears, ONEDNN_BATCH_HINT, budget_bytes))
    add("row-major", linears, *cpu_linear.row_major_products(linears, budget_bytes))
    plain = [m for m in modules if type(m) is nn.Linear]
    sizes = [n for n in (1 << i for i in range(max_batch.bit_length(), 1, -1)) if n <= max_batch]
    packed, nbytes = cpu_linear.pack_for_batch_sizes(plain, sizes, budget_bytes)
    for rows, products in packed.items():
        add(f"MKL-packed {rows}", plain, products, nbytes // len(packed), frozenset({rows}))
    return found


def tune(decoder, layout, max_batch: int, budget_bytes: int, rounds: int = 3) -> Tuning:
    """Give `decoder` (a `FastDecoder`) the fastest layout for steps of 1 to `max_batch` rows,
    among the weights as stored and the copies `candidates` builds; returns what was chosen."""
    tuning = Tuning()
    if budget_bytes <= 0:
        return tuning
    found = candidates(decoder.product_modules(), max_batch, budget_bytes)
    if not found:
        return tuning
    device = next(decoder.model.parameters()).device
    kv = BatchKV(layout.shape, rows=max_batch, capacity=_CONTEXT + 1, device=device,
                 layer_types=layout.layer_types, windows=layout.windows)
    kv.lengths = [_CONTEXT] * max_batch
    vocab = int(decoder.model.config.vocab_size)
    tokens = [(i * 7919 + 11) % vocab for i in range(max_batch)]
    found.insert(0, Candidate(AS_STORED, {}, 0))
    # None: the decoder's own products on the weights as stored
    tables = {c.name: decoder.table_from(c.products) if c.products else None for c in found}

    def step(rows: int, name: str) -> float:
        decoder.use_table(rows, tables[name])
        start = time.perf_counter()
        decoder.decode_rows(kv, tokens[:rows])
        return time.perf_counter() - start

    best_by_rows: dict[int, dict[str, float]] = {}
    for rows in range(1, max_batch + 1):
        names = [c.name for c in found if c.serves(rows)]
        for name in names:  # a layout's first step at a row count sets up its kernels: not timed
            step(rows, name)
        best = {name: step(rows, name) for name in names}
        for name in names:  # two timed steps each before any is left out (one can be unlucky)
            best[name] = min(best[name], step(rows, name))
        # A layout over `_PRUNE` times the fastest is out: timing it again only slows the load
        # (row-major steps took 3-5x the others' on one machine).
        names = [name for name in names if best[name] <= _PRUNE * min(best.values())]
        for _ in range(rounds - 2):
            for name in names:
                best[name] = min(best[name], step(rows, name))
        chosen = min(names, key=best.__getitem__)
        decoder.use_table(rows, tables[chosen])
        tuning.chosen[rows] = chosen
        tuning.step_ms[rows] = {name: seconds * 1e3 for name, seconds in best.items()}
        best_by_rows[rows] = best
    _prefer_the_common_layout(decoder, tuning, best_by_rows, tables)
    kept = set(tuning.chosen.values())
    tuning.nbytes = sum(c.nbytes for c in found if c.name in kept)
    del tables, found  # the copies no row count chose go with them
    huge_pages.return_freed_memory()
    return tuning


def _prefer_the_common_layout(decoder, tuning: Tuning, best: dict[int, dict[str, float]], tables: dict) -> None:
    """Move each row count to the layout most row counts chose where that one timed within
    `NEAR_FASTEST` of its fastest."""
    if not tuning.chosen:
        return
    common = Counter(tuning.chosen.values()).most_common(1)[0][0]  # ties: the first chosen (fewest rows)
    for rows, chosen in tuning.chosen.items():
        if chosen != common and common in best[rows] and best[rows][common] <= NEAR_FASTEST * best[rows][chosen]:
            decoder.use_table(rows, tables[common])
            tuning.chosen[rows] = common
