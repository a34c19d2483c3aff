"""Decode-step layouts chosen by timing (`engine.decode_tuning`) and oneDNN's reordered copies
(`cpu_linear.onednn_products`): the fastest layout wins at each row count whatever the CPU, the
copies no row count chose are let go, and every copy computes what its linear does."""

from __future__ import annotations

import gc
import shutil
import time
import weakref

import pytest
import torch
from torch import nn

from hitrate.engine import cpu_linear, decode_tuning
from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.runner import TransformersEngine

needs_onednn = pytest.mark.skipif(not cpu_linear.onednn_available(torch.float32), reason="torch built without oneDNN")


def untuned(path) -> TransformersEngine:
    """An engine whose steps all run on the weights as stored (no copies allowed)."""
    engine = TransformersEngine.from_pretrained(path, pool_tokens=4096, max_batch=4, pack_min_bytes=None)
    assert engine.fast_decoder is not None and engine.step_layouts.chosen == {}
    return engine


def slowed(module: nn.Module, slow_at) -> decode_tuning.Product:
    """`module`'s product on its weights as stored, 5 ms slower when `slow_at(rows)`."""
    product = cpu_linear.weight_product(module.weight, module.bias)

    def run(x: torch.Tensor) -> torch.Tensor:
        if slow_at(x.shape[0]):
            time.sleep(0.005)
        return product(x)
    return run


def test_each_row_count_gets_the_layout_that_timed_fastest(tiny_llama_path, monkeypatch):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    modules = decoder.product_modules()
    decoder._plain = decoder._table(lambda m: slowed(m, lambda rows: True))  # "as stored" slow everywhere
    ballast = torch.zeros(1 << 16)
    left_out = weakref.ref(ballast)

    never_steps = []

    def fake_candidates(found_modules, max_batch, budget_bytes):
        assert found_modules == modules and max_batch == 4
        never = {id(m): slowed(m, lambda rows, kept=ballast: never_steps.append(rows) or True) for m in modules}
        return [
            decode_tuning.Candidate("fast at odd", {id(m): slowed(m, lambda rows: rows % 2 == 0) for m in modules}, 10),
            decode_tuning.Candidate("fast at even", {id(m): slowed(m, lambda rows: rows % 2 == 1) for m in modules}, 20),
            decode_tuning.Candidate("never fast", never, 40),
        ]

    monkeypatch.setattr(decode_tuning, "candidates", fake_candidates)
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, rounds=2)
    assert tuning.chosen == {1: "fast at odd", 2: "fast at even", 3: "fast at odd", 4: "fast at even"}
    assert tuning.nbytes == 30  # the copies kept: the two chosen
    for rows, times in tuning.step_ms.items():
        assert set(times) == {"as stored", "fast at odd", "fast at even", "never fast"}
        assert times[tuning.chosen[rows]] < 20 <= min(times["as stored"], times["never fast"])  # 9 products x 5 ms
    assert decoder.batch_pack_sizes == (4, 3, 2, 1)
    # Over twice the fastest's time on its first two timed steps at each row count (after one
    # untimed): never timed again.
    assert sorted(never_steps) == sorted([1, 2, 3, 4] * 3 * len(modules))
    del ballast
    gc.collect()
    assert left_out() is None  # the layout no row count chose is let go


def test_a_row_count_runs_on_the_common_layout_when_its_own_fastest_is_barely_faster(tiny_llama_path, monkeypatch):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    modules = decoder.product_modules()
    decoder._plain = decoder._table(lambda m: slowed(m, lambda rows: True))
    common = decode_tuning.Candidate("common", {id(m): slowed(m, lambda rows: False) for m in modules}, 10)
    # Faster than `common` at 3 rows by one product's worth of work: within `NEAR_FASTEST` of it.
    edge = decode_tuning.Candidate("edge", {id(m): cpu_linear.weight_product(m.weight, m.bias) for m in modules}, 20,
                                   rows=frozenset({3}))
    monkeypatch.setattr(decode_tuning, "candidates", lambda *args: [common, edge])
    monkeypatch.setattr(decode_tuning, "NEAR_FASTEST", 1e9)  # anything slower than the fastest counts as near
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30)
    assert tuning.chosen == dict.fromkeys(range(1, 5), "common") and tuning.nbytes == 10
    monkeypatch.setattr(decode_tuning, "NEAR_FASTEST", 1.0)  # the fastest wins, however close
    times = {}
    for _ in range(5):  # the two are alike: whichever timed faster at 3 rows is chosen there
        tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30)
        times = tuning.step_ms[3]
        assert tuning.chosen[3] == min(times, key=times.get) and tuning.chosen[1] == "common"


def test_a_layout_for_one_row_count_is_timed_only_there(tiny_llama_path, monkeypatch):
    engine = untuned(tiny_llama_path)
    decoder = engine.fast_decoder
    modules = decoder.product_modules()
    decoder._plain = decoder._table(lambda m: slowed(m, lambda rows: True))
    only_three = decode_tuning.Candidate("for 3 rows", {id(m): slowed(m, lambda rows: False) for m in modules}, 5,
                                         rows=frozenset({3}))
    monkeypatch.setattr(decode_tuning, "candidates", lambda *args: [only_three])
    tuning = decode_tuning.tune(decoder, engine.layout, 4, 1 << 30, rounds=1)
    assert tuning.chosen == {1: "as stored", 2: "as stored", 3: "for 3 rows", 4: "as stored"}
    assert set(tuning.step_ms[2]) == {"as stored"} and tuning.nbytes == 5
    assert decoder.batch_pack_sizes == (3,)  # the others run on the weights as stored


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
    monkeypatch.setattr(decode_tuning, "tune", lambda decoder, layout, rows, budget: decode_tuning.Tuning(
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
