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

A busy machine times garbage (two compute threads on two cores, one of them held by another
process: "as stored 2,553 ms, GEMV kernel 4,000 ms" per step, where a quiet machine times 40-60).
So each layout is timed at least twice at each row count, and where one layout's samples disagree
by more than `NOISE_SPREAD` the row count keeps `default_layout` instead of a choice made by noise;
when most row counts are noisy, all of them do and `Tuning.loaded` says so (verify prints it).

What was chosen is kept on disk (`engine.tuning_cache`, keyed by the weights, the CPU, the thread
count, the dtype and the kernels' build), so a second start builds only the chosen copies and
times nothing; a loaded machine's result is not kept. `timed=False` (`--no-tune`) times nothing
either and runs every row count on `default_layout`. The clock is a parameter (`StepTimer`):
tests give the tuning their timings instead of depending on how busy the machine is.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import torch
from torch import nn

from hitrate.engine import cpu_linear, huge_pages
from hitrate.engine.batch_kv import BatchKV

if TYPE_CHECKING:
    from hitrate.engine.tuning_cache import TuningCache

Product = Callable[[torch.Tensor], torch.Tensor]
# (rows, layout name, run one step) -> the seconds the step took
StepTimer = Callable[[int, str, Callable[[], object]], float]
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
# One layout's timed samples at one row count that differ by more than this factor (slowest over
# fastest) mean another process took the CPU while timing: on a quiet machine they agree within
# 10-20%, and under load they spread 2-10x.
NOISE_SPREAD = 1.5


def clock_timer(clock: Callable[[], float] = time.perf_counter) -> StepTimer:
    """The step timer on a real clock."""
    def timed(rows: int, name: str, run: Callable[[], object]) -> float:
        start = clock()
        run()
        return clock() - start
    return timed


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
    # how the layouts were chosen: "timed", "cached" (a previous start's timing), "not tuned"
    # (`timed=False`), "loaded machine" (most row counts' samples disagreed: the default kept)
    source: str = "timed"
    # row counts whose samples disagreed by more than `NOISE_SPREAD`, with the widest spread
    noisy: dict[int, float] = field(default_factory=dict)
    default: str = AS_STORED  # what a row count keeps when it is not chosen by timing

    @property
    def loaded(self) -> bool:
        return self.source == "loaded machine"

    def note(self) -> str:
        """One line on how the layouts were chosen, for verify's report and the load's progress."""
        if not self.chosen:
            return "nothing timed: decode steps run on the weights as stored"
        if self.source == "cached":
            return "layouts from a previous start's timing on this machine (cached)"
        if self.source == "not tuned":
            return f"not timed (--no-tune): every row count runs on {self.default}"
        worst = max(self.noisy.values(), default=1.0)
        if self.loaded:
            return (f"the machine was busy while timing (one layout's samples differed up to {worst:.1f}x, over "
                    f"the {NOISE_SPREAD:.1f}x allowed): every row count keeps {self.default}; not cached")
        if self.noisy:
            return (f"timed; row counts {', '.join(map(str, sorted(self.noisy)))} keep {self.default} "
                    f"(samples differed up to {worst:.1f}x)")
        return "timed at load"

    @property
    def steps_use_model_copies(self) -> bool:
        """Whether some row count's steps run on the model's own oneDNN copies (`ONEDNN` reuses
        a `PackedLinear`'s; the weights as stored call it); False when nothing was tuned."""
        return not self.chosen or any(name in (ONEDNN, AS_STORED) for name in self.chosen.values())


def candidates(modules: list[nn.Module], max_batch: int, budget_bytes: int,
               only: Collection[str] | None = None) -> list[Candidate]:
    """The weight copies that fit `budget_bytes` in all, most broadly useful first: the engine's
    own kernel's (any row count; float32 or bfloat16 weights), oneDNN's (any), row-major (any),
    then MKL's packed copies for the powers of two from `max_batch` down to 4 (each for its own
    row count; these three float32 only). Each copy is checked against its linear in
    `engine.cpu_linear`. `only`: build just the layouts of these names."""
    found: list[Candidate] = []
    linears = [m for m in modules if isinstance(m, nn.Linear)]

    def add(name: str, covered: list[nn.Module], products: list[Product], nbytes: int, rows=None) -> None:
        nonlocal budget_bytes
        if products:
            found.append(Candidate(name, {id(m): p for m, p in zip(covered, products)}, nbytes, rows))
            budget_bytes -= nbytes

    def wanted(name: str) -> bool:
        return only is None or name in only

    if wanted(GEMV_KERNEL):
        add(GEMV_KERNEL, linears, *cpu_linear.packed_gemv_products(linears, budget_bytes))
    if wanted(ONEDNN):
        add(ONEDNN, linears, *cpu_linear.onednn_products(linears, ONEDNN_BATCH_HINT, budget_bytes))
    if wanted("row-major"):
        add("row-major", linears, *cpu_linear.row_major_products(linears, budget_bytes))
    plain = [m for m in modules if type(m) is nn.Linear]
    sizes = [n for n in (1 << i for i in range(max_batch.bit_length(), 1, -1))
             if n <= max_batch and wanted(f"MKL-packed {n}")]
    packed, nbytes = cpu_linear.pack_for_batch_sizes(plain, sizes, budget_bytes)
    for rows, products in packed.items():
        add(f"MKL-packed {rows}", plain, products, nbytes // len(packed), frozenset({rows}))
    return found


def default_layout(found: list[Candidate]) -> str:
    """The layout a row count keeps when it is not chosen by timing: the engine's own kernel where
    it was built (it timed fastest at every row count on the AMD EPYC machine and never slower than
    MKL as stored), else the weights as stored."""
    return GEMV_KERNEL if any(c.name == GEMV_KERNEL for c in found) else AS_STORED


def tune(decoder, layout, max_batch: int, budget_bytes: int, rounds: int = 3, *, timed: bool = True,
         timer: StepTimer | None = None, cache: "TuningCache | None" = None) -> Tuning:
    """Give `decoder` (a `FastDecoder`) the fastest layout for steps of 1 to `max_batch` rows,
    among the weights as stored and the copies `candidates` builds; returns what was chosen.
    `rounds`: timed steps per layout and row count (at least 2: the spread needs two).
    `timed=False`: no timing, every row count on `default_layout`. `timer`: how a step is timed
    (default: `clock_timer()`). `cache`: where a previous start's choice is read and this one's
    kept."""
    tuning = Tuning()
    if budget_bytes <= 0:
        return tuning
    modules = decoder.product_modules()
    stored = cache.load() if cache is not None and timed else None
    if stored is not None:
        chosen, tuning.step_ms = stored
        found = candidates(modules, max_batch, budget_bytes, only=set(chosen.values()))
        tuning.default = default_layout(found)
        if set(chosen.values()) <= {c.name for c in found} | {AS_STORED} and set(chosen) == set(range(1, max_batch + 1)):
            tables = {c.name: decoder.table_from(c.products) for c in found}
            for rows, name in chosen.items():
                decoder.use_table(rows, tables.get(name))
            return _keep(tuning, found, chosen, "cached")
        tuning.step_ms = {}  # the cache names a copy this load could not build: time again
        found.clear()
    found = candidates(modules, max_batch, budget_bytes, only=None if timed else {GEMV_KERNEL})
    tuning.default = default_layout(found)
    if not timed:
        table = decoder.table_from(found[0].products) if found else None
        for rows in range(1, max_batch + 1):
            decoder.use_table(rows, table)
        return _keep(tuning, found, dict.fromkeys(range(1, max_batch + 1), tuning.default), "not tuned")
    if not found:
        return tuning
    timer = timer or clock_timer()
    rounds = max(rounds, 2)
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
        return timer(rows, name, lambda: decoder.decode_rows(kv, tokens[:rows]))

    best_by_rows: dict[int, dict[str, float]] = {}
    for rows in range(1, max_batch + 1):
        names = [c.name for c in found if c.serves(rows)]
        for name in names:  # a layout's first step at a row count sets up its kernels: not timed
            step(rows, name)
        samples = {name: [step(rows, name)] for name in names}
        for name in names:  # two timed steps each before any is left out (one can be unlucky)
            samples[name].append(step(rows, name))
        best = {name: min(times) for name, times in samples.items()}
        # A layout over `_PRUNE` times the fastest is out: timing it again only slows the load
        # (row-major steps took 3-5x the others' on one machine).
        names = [name for name in names if best[name] <= _PRUNE * min(best.values())]
        for _ in range(rounds - 2):
            for name in names:
                samples[name].append(step(rows, name))
        best = {name: min(times) for name, times in samples.items()}
        spread = max(max(samples[name]) / max(min(samples[name]), 1e-12) for name in names)
        if spread > NOISE_SPREAD:
            tuning.noisy[rows] = spread
        tuning.chosen[rows] = min(names, key=best.__getitem__)
        tuning.step_ms[rows] = {name: seconds * 1e3 for name, seconds in best.items()}
        best_by_rows[rows] = best
    source = "timed"
    if 2 * len(tuning.noisy) > max_batch:  # most row counts: the machine, not a layout, was slow
        source = "loaded machine"
        tuning.chosen = dict.fromkeys(tuning.chosen, tuning.default)
    else:
        for rows in tuning.noisy:
            tuning.chosen[rows] = tuning.default
        _prefer_the_common_layout(tuning, best_by_rows)
    for rows, name in tuning.chosen.items():
        decoder.use_table(rows, tables[name])
    if cache is not None and source == "timed":
        cache.store(tuning.chosen, tuning.step_ms)
    del tables
    return _keep(tuning, found, tuning.chosen, source)


def _keep(tuning: Tuning, found: list[Candidate], chosen: dict[int, str], source: str) -> Tuning:
    """`tuning` with `chosen`, `source` and the bytes of the copies kept; the copies no row count
    chose go with `found`."""
    tuning.chosen, tuning.source = chosen, source
    kept = set(chosen.values())
    tuning.nbytes = sum(c.nbytes for c in found if c.name in kept)
    found.clear()
    huge_pages.return_freed_memory()
    return tuning


def _prefer_the_common_layout(tuning: Tuning, best: dict[int, dict[str, float]]) -> None:
    """Move each row count to the layout most row counts chose where that one timed within
    `NEAR_FASTEST` of its fastest (row counts that kept the default for noise stay with it)."""
    if not tuning.chosen:
        return
    common = Counter(tuning.chosen.values()).most_common(1)[0][0]  # ties: the first chosen (fewest rows)
    for rows, chosen in tuning.chosen.items():
        if rows in tuning.noisy:
            continue
        if chosen != common and common in best[rows] and best[rows][common] <= NEAR_FASTEST * best[rows][chosen]:
            tuning.chosen[rows] = common
