"""Decode-step layouts chosen by timing (`engine.decode_tuning`) and oneDNN's reordered copies
(`cpu_linear.onednn_products`): the fastest layout wins at each row count whatever the CPU, the
copies no row count chose are let go, and every copy computes what its linear does."""

from __future__ import annotations

import gc
import shutil
import weakref
from collections import Counter

import pytest
import torch
from torch import nn

from hitrate.engine import cpu_linear, decode_tuning
from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.tuning_cache import TuningCache

needs_onednn = pytest.mark.skipif(not cpu_linear.onednn_available(torch.float32), reason="torch built without oneDNN")


def untuned(path) -> TransformersEngine:
    """An engine whose steps all run on the weights as stored (no copies allowed)."""
    engine = TransformersEngine.from_pretrained(path, pool_tokens=4096, max_batch=4, pack_min_bytes=None)
    assert engine.fast_decoder is not None and engine.step_layouts.chosen == {}
    return engine


def plain(module: nn.Module, calls: list | None = None) -> decode_tuning.Product:
    """`module`'s product on its weights as stored; appends the row count to `calls` each time."""
    product = cpu_linear.weight_product(module.weight, module.bias)

    def run(x: torch.Tensor) -> torch.Tensor:
        if calls is not None:
            calls.append(x.shape[0])
        return product(x)
    return run


class ScriptedTimer:
    """A step timer that runs each step and says it took `ms(rows, name, sample)` milliseconds
    (`sample`: how many steps of that layout at that row count came before): the tests choose the
    timings instead of measuring them on a machine whose load they do not control."""

    def __init__(self, ms) -> None:
        self.ms = ms
        self.calls: Counter = Counter()

    def __call__(self, rows: int, name: str, run) -> float:
        sample = self.calls[rows, name]
        self.calls[rows, name] += 1
        run()
        return self.ms(rows, name, sample) / 1e3


def fake_layouts(decoder, **names_to_calls) -> list[decode_tuning.Candidate]:
    modules = decoder.product_modules()
    return [decode_tuning.Candidate(name, {id(m): plain(m, calls) for m in modules}, 10 * (i + 1))
            for i, (name, calls) in enumerate(names_to_calls.items())]


def test_each_row_count_gets_the_layout_that_timed_fastest(tiny_llama_path, monkeypatch):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    modules = decoder.product_modules()
    ballast = torch.zeros(1 << 16)
    left_out = weakref.ref(ballast)
    never_steps: list[int] = []

    def fake_candidates(found_modules, max_batch, budget_bytes, only=None):
        assert found_modules == modules and max_batch == 4 and only is None
        never = {id(m): plain(m, never_steps) for m in modules}
        never["ballast"] = ballast  # held as long as the candidate is
        return [
            decode_tuning.Candidate("fast at odd", {id(m): plain(m) for m in modules}, 10),
            decode_tuning.Candidate("fast at even", {id(m): plain(m) for m in modules}, 20),
            decode_tuning.Candidate("never fast", never, 40),
        ]

    timings = {"as stored": lambda rows: 30.0, "fast at odd": lambda rows: 5.0 if rows % 2 else 30.0,
               "fast at even": lambda rows: 30.0 if rows % 2 else 5.0, "never fast": lambda rows: 80.0}
    timer = ScriptedTimer(lambda rows, name, sample: timings[name](rows))
    monkeypatch.setattr(decode_tuning, "candidates", fake_candidates)
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, rounds=3, timer=timer)
    assert tuning.chosen == {1: "fast at odd", 2: "fast at even", 3: "fast at odd", 4: "fast at even"}
    assert tuning.source == "timed" and not tuning.noisy
    assert tuning.nbytes == 30  # the copies kept: the two chosen
    for rows, times in tuning.step_ms.items():
        assert times == {name: timings[name](rows) for name in timings}
    assert decoder.batch_pack_sizes == (4, 3, 2, 1)
    # Over twice the fastest's time on its first two timed steps at each row count (after one
    # untimed): never timed again; the one within twice the fastest a third time.
    assert sorted(never_steps) == sorted([1, 2, 3, 4] * 3 * len(modules))
    assert all(timer.calls[rows, name] == (4 if name == tuning.chosen[rows] else 3) for rows in range(1, 5) for name in timings)
    del ballast
    gc.collect()
    assert left_out() is None  # the layout no row count chose is let go


def test_a_row_count_runs_on_the_common_layout_when_its_own_fastest_is_barely_faster(tiny_llama_path, monkeypatch):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    modules = decoder.product_modules()
    common = decode_tuning.Candidate("common", {id(m): plain(m) for m in modules}, 10)
    edge = decode_tuning.Candidate("edge", {id(m): plain(m) for m in modules}, 20, rows=frozenset({3}))
    monkeypatch.setattr(decode_tuning, "candidates", lambda *args, **kwargs: [common, edge])
    # "edge" 5% faster than "common" at 3 rows; the weights as stored slow everywhere.
    ms = {"as stored": 40.0, "common": 10.0, "edge": 9.5}
    timer = ScriptedTimer(lambda rows, name, sample: ms[name])
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, timer=timer)
    assert tuning.chosen == dict.fromkeys(range(1, 5), "common") and tuning.nbytes == 10
    monkeypatch.setattr(decode_tuning, "NEAR_FASTEST", 1.0)  # the fastest wins, however close
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, timer=timer)
    assert tuning.chosen == {1: "common", 2: "common", 3: "edge", 4: "common"} and tuning.nbytes == 30


def test_a_layout_for_one_row_count_is_timed_only_there(tiny_llama_path, monkeypatch):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    modules = decoder.product_modules()
    only_three = decode_tuning.Candidate("for 3 rows", {id(m): plain(m) for m in modules}, 5, rows=frozenset({3}))
    monkeypatch.setattr(decode_tuning, "candidates", lambda *args, **kwargs: [only_three])
    timer = ScriptedTimer(lambda rows, name, sample: 50.0 if name == "as stored" else 5.0)
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, rounds=2, timer=timer)
    assert tuning.chosen == {1: "as stored", 2: "as stored", 3: "for 3 rows", 4: "as stored"}
    assert set(tuning.step_ms[2]) == {"as stored"} and tuning.nbytes == 5
    assert {key for key in timer.calls if key[1] == "for 3 rows"} == {(3, "for 3 rows")}
    assert decoder.batch_pack_sizes == (3,)  # the others run on the weights as stored


def test_a_row_count_whose_samples_disagree_keeps_the_default_layout(tiny_llama_path, monkeypatch):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    monkeypatch.setattr(decode_tuning, "candidates", lambda *a, **k: fake_layouts(decoder, copy=None))

    # "copy" times fastest everywhere, but at 2 rows one "as stored" sample took 3x another:
    # another process had the CPU, and the choice there would be by noise.
    def ms(rows, name, sample):
        if name == "as stored":
            return 60.0 if rows == 2 and sample == 2 else 20.0
        return 10.0
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, timer=ScriptedTimer(ms))
    assert tuning.noisy == {2: 3.0} and tuning.source == "timed"
    assert tuning.chosen == {1: "copy", 2: "as stored", 3: "copy", 4: "copy"}
    assert "2 keep as stored" in tuning.note()


def test_a_loaded_machine_keeps_the_default_everywhere_and_is_not_cached(tiny_llama_path, monkeypatch, tmp_path):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    monkeypatch.setattr(decode_tuning, "candidates", lambda *a, **k: fake_layouts(decoder, copy=None))
    # Every layout's samples alternate 10 and 40 ms at every row count: "copy" would win by luck.
    timer = ScriptedTimer(lambda rows, name, sample: 40.0 if (sample + (name == "copy")) % 2 else 10.0)
    cache = TuningCache(decoder.model, max_batch=4, budget_bytes=1 << 30, folder=tmp_path)
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, timer=timer, cache=cache)
    assert tuning.loaded and tuning.chosen == dict.fromkeys(range(1, 5), "as stored") and tuning.nbytes == 0
    assert "busy while timing" in tuning.note() and "not cached" in tuning.note()
    assert not cache.path.exists() and decoder.batch_pack_sizes == ()


def test_the_second_start_reads_the_choice_and_times_nothing(tiny_llama_path, monkeypatch, tmp_path):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    built: list[set | None] = []

    def fake_candidates(modules, max_batch, budget_bytes, only=None):
        built.append(only)
        names = [n for n in ("copy", "other") if only is None or n in only]
        return fake_layouts(decoder, **dict.fromkeys(names))
    monkeypatch.setattr(decode_tuning, "candidates", fake_candidates)
    timer = ScriptedTimer(lambda rows, name, sample: {"as stored": 30.0, "copy": 10.0, "other": 20.0}[name])
    cache = TuningCache(decoder.model, max_batch=4, budget_bytes=1 << 30, folder=tmp_path)
    first = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, timer=timer, cache=cache)
    assert first.source == "timed" and cache.path.exists()
    calls = sum(timer.calls.values())
    again = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, timer=timer,
                               cache=TuningCache(decoder.model, max_batch=4, budget_bytes=1 << 30, folder=tmp_path))
    assert again.source == "cached" and sum(timer.calls.values()) == calls  # not one step timed
    assert again.chosen == first.chosen == dict.fromkeys(range(1, 5), "copy") and again.step_ms == first.step_ms
    assert built == [None, {"copy"}] and again.nbytes == 10  # only the chosen copy built
    assert decoder.batch_pack_sizes == (4, 3, 2, 1)
    # Another thread count, budget or row limit is another key.
    for other in (dict(max_batch=4, budget_bytes=1 << 30, threads=cache.threads + 1),
                  dict(max_batch=4, budget_bytes=1 << 20), dict(max_batch=2, budget_bytes=1 << 30)):
        assert TuningCache(decoder.model, folder=tmp_path, **other).key != cache.key
    # A cache file that is not JSON is no choice: the steps are timed again.
    cache.path.write_text("{")
    assert decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, timer=timer, cache=cache).source == "timed"


def test_another_model_is_another_key(tiny_llama_path, tiny_qwen2_path, tmp_path):
    first, second = untuned(tiny_llama_path), untuned(tiny_qwen2_path)
    key = TuningCache(first.model, max_batch=4, budget_bytes=1, folder=tmp_path).key
    assert key == TuningCache(first.model, max_batch=4, budget_bytes=1, folder=tmp_path).key
    assert key != TuningCache(second.model, max_batch=4, budget_bytes=1, folder=tmp_path).key
    with torch.no_grad():
        next(first.model.parameters()).mul_(2)  # the same shapes, other values
    assert key != TuningCache(first.model, max_batch=4, budget_bytes=1, folder=tmp_path).key


def test_without_tuning_every_row_count_runs_on_the_default(tiny_llama_path, monkeypatch):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    asked: list = []

    def fake_candidates(modules, max_batch, budget_bytes, only=None):
        asked.append(only)
        return fake_layouts(decoder, **{decode_tuning.GEMV_KERNEL: None})
    monkeypatch.setattr(decode_tuning, "candidates", fake_candidates)
    timer = ScriptedTimer(lambda *a: 1.0)
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, timed=False, timer=timer)
    assert asked == [{decode_tuning.GEMV_KERNEL}] and not timer.calls
    assert tuning.source == "not tuned" and tuning.chosen == dict.fromkeys(range(1, 5), decode_tuning.GEMV_KERNEL)
    assert "--no-tune" in tuning.note() and decoder.batch_pack_sizes == (4, 3, 2, 1)


@needs_onednn
def test_every_candidate_layout_computes_the_steps_of_the_weights_as_stored(tiny_model_factory):
    path = tiny_model_factory("gemma3_text", config_overrides={"tie_word_embeddings": True})
    engine = TransformersEngine.from_pretrained(path, pool_tokens=4096, max_batch=4)  # weights stored `[in, out]`
    decoder, layout = engine.fast_decoder, engine.layout
    found = decode_tuning.candidates(decoder.product_modules(), 4, 1 << 30)
    names = [c.name for c in found]
    # The engine's own kernel wherever there is a C compiler to build it (CI installs one).
    kernel = [decode_tuning.GEMV_KERNEL] if shutil.which("cc") else []
    assert names[: len(kernel) + 2] == [*kernel, "oneDNN", "row-major"]
    if cpu_linear.mkl_packed_available():
        assert names[len(kernel) + 2:] == ["MKL-packed 4"] and found[-1].rows == frozenset({4})
    from hitrate.engine.batch_kv import BatchKV
    kv = BatchKV(layout.shape, rows=4, capacity=8, device=torch.device("cpu"), layer_types=layout.layer_types,
                 windows=layout.windows)
    kv.lengths = [5, 2, 7, 3]
    tokens = [11, 22, 33, 44]
    for rows in range(1, 5):
        decoder.use_table(rows, None)
        reference = decoder.decode_rows(kv, tokens[:rows])
        for candidate in found:
            if candidate.serves(rows):
                decoder.use_table(rows, decoder.table_from(candidate.products))
                diff = float((decoder.decode_rows(kv, tokens[:rows]) - reference).abs().max())
                assert diff <= 1e-4 * max(float(reference.abs().max()), 1.0), (candidate.name, rows)
        decoder.use_table(rows, None)
    assert decode_tuning.tune(decoder, layout, 4, 0).chosen == {}  # no budget: nothing to choose from


@needs_onednn
@pytest.mark.parametrize("hint", [1, 8])
def test_onednn_products_equal_the_linears_at_every_row_count(hint):
    torch.manual_seed(hint)
    stored_in_out = nn.Linear(300, 96)
    with torch.no_grad():
        stored_in_out.weight = nn.Parameter(stored_in_out.weight.detach().t().contiguous().t(), requires_grad=False)
    linears = [nn.Linear(96, 300), stored_in_out, nn.Linear(96, 1000, bias=False)]
    products, extra = cpu_linear.onednn_products(linears, hint, 1 << 30)
    assert len(products) == 3 and extra == sum(lin.weight.numel() * 4 for lin in linears)
    with torch.inference_mode():
        for rows in (1, 2, 3, 5, 8, 13):
            for product, linear in zip(products, linears):
                x = torch.randn(rows, linear.in_features)
                assert float((product(x) - linear(x)).abs().max()) <= 1e-5 * float(linear(x).abs().max())


@needs_onednn
def test_onednn_copies_share_tied_weights_reuse_a_packed_linear_and_fit_the_budget():
    first = nn.Linear(64, 512, bias=False)
    tied = nn.Linear(64, 512, bias=False)
    tied.weight = first.weight
    size = 512 * 64 * 4
    products, extra = cpu_linear.onednn_products([first, tied], 8, size)
    assert len(products) == 2 and extra == size  # one copy for the shared weight
    assert cpu_linear.onednn_products([first], 8, size - 1) == ([], 0)
    packed = cpu_linear.PackedLinear(nn.Linear(64, 256), min_rows=3, batch_hint=8)
    assert cpu_linear.onednn_products([packed], 8, 0)[1] == 0  # its own copy, reordered for the same rows
    assert cpu_linear.onednn_products([packed], 4, 1 << 30)[1] == 256 * 64 * 4  # another hint: a new copy
    assert cpu_linear.onednn_products([nn.Linear(64, 512).to(torch.bfloat16)], 8, 1 << 30) == ([], 0)


@needs_onednn
def test_an_onednn_copy_that_disagrees_is_not_used(monkeypatch):
    real = torch.Tensor.contiguous
    monkeypatch.setattr(torch.Tensor, "contiguous", lambda self, *a, **k: real(self, *a, **k) * 1.001)
    assert cpu_linear.onednn_products([nn.Linear(64, 512)], 8, 1 << 30) == ([], 0)


@needs_onednn
@pytest.mark.parametrize("chosen", [decode_tuning.GEMV_KERNEL, decode_tuning.ONEDNN, decode_tuning.AS_STORED])
def test_the_heads_onednn_copy_goes_when_no_step_runs_on_it(tiny_llama_path, monkeypatch, chosen):
    plain = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, max_batch=4, pack_min_bytes=None)
    monkeypatch.setattr(decode_tuning, "tune", lambda decoder, layout, rows, budget, **kwargs: decode_tuning.Tuning(
        chosen=dict.fromkeys(range(1, rows + 1), chosen)))
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, max_batch=4, pack_min_bytes=0)
    packed = [m for m in engine.model.modules() if isinstance(m, cpu_linear.PackedLinear)]
    kept = chosen != decode_tuning.GEMV_KERNEL
    assert bool(packed) == kept
    assert (engine.packed_weight_bytes > 0) == kept  # the copies the step's own products would hold: none here
    assert isinstance(engine.fast_decoder._plain[1], cpu_linear.PackedLinear) == kept  # the step's head as stored
    prompt = [(7 * i + 3) % 1000 for i in range(40)]
    reference, _ = plain.prefill_logits(prompt)
    logits, _ = engine.prefill_logits(prompt)  # every position's logits: the model's own forward
    assert float((logits - reference).abs().max()) <= 1e-4 * max(float(reference.abs().max()), 1.0)
    result = engine.generate(GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=6)))
    assert result.token_ids == plain.generate(GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=6))).token_ids
