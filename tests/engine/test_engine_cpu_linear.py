"""Prepacked oneDNN linears (`engine.cpu_linear`): float32 stays within float32 rounding of
`nn.Linear` for every row count, tied weights stay tied, an engine whose linears are all packed
still gives each concurrent request its single-request tokens, and a bfloat16 engine runs on
packed weights with logits close to float32's."""

from __future__ import annotations

import random
import shutil
import threading

import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from hitrate.engine import cpu_linear, cpu_threads
from hitrate.engine.api import GenerationRequest, GenerationResult, SamplingParams
from hitrate.engine.runner import TransformersEngine

pytestmark = pytest.mark.skipif(not cpu_linear.onednn_available(torch.float32), reason="torch built without oneDNN")


def tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 500) for _ in range(n)]


def req(prompt, n) -> GenerationRequest:
    return GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=n, temperature=0, ignore_eos=True))


def run_concurrently(engine: TransformersEngine, requests: list[GenerationRequest]) -> list[GenerationResult]:
    results: dict[int, GenerationResult] = {}
    start = threading.Barrier(len(requests))

    def work(i: int) -> None:
        start.wait()
        results[i] = engine.generate(requests[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == len(requests)
    return [results[i] for i in range(len(requests))]


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 8, 37])
def test_packed_float32_linear_matches_nn_linear(rows):
    torch.manual_seed(rows)
    linear = nn.Linear(96, 1000)
    packed = cpu_linear.PackedLinear(linear, min_rows=1)
    x = torch.randn(1, rows, 96)
    with torch.no_grad():
        diff = float((packed(x) - linear(x)).abs().max())
    assert diff <= 1e-5
    assert packed.weight is linear.weight and packed.bias is linear.bias


def test_packing_keeps_a_tied_head_tied_and_the_logits(tiny_model_factory):
    path = tiny_model_factory("llama", config_overrides={"tie_word_embeddings": True})
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    ids = torch.tensor([tokens(1, 6), tokens(2, 6), tokens(3, 6)])
    with torch.no_grad():
        before = model(input_ids=ids).logits
        extra = cpu_linear.pack_large_linears(model, min_bytes=0)
        after = model(input_ids=ids).logits
    assert isinstance(model.lm_head, cpu_linear.PackedLinear)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert extra > 0
    assert float((after - before).abs().max()) <= 1e-4


def test_weights_stored_in_out_give_the_same_logits_and_stay_tied(tiny_model_factory):
    path = tiny_model_factory("gemma3_text", config_overrides={"tie_word_embeddings": True})
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = torch.tensor([tokens(4, 40)])
    with torch.no_grad():
        before = model(input_ids=ids).logits
        relaid = cpu_linear.store_transposed(model)
        after = model(input_ids=ids).logits
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert relaid == len(linears)  # the tied head and embedding count once
    for linear in linears:
        assert linear.weight.t().is_contiguous() and not linear.weight.is_contiguous()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert torch.equal(after, before)


def test_small_matrices_are_left_to_mkl(tiny_llama_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_path, dtype=torch.float32).eval()
    assert cpu_linear.pack_large_linears(model) == 0  # the tiny model's matrices are far below the threshold
    assert not any(isinstance(m, cpu_linear.PackedLinear) for m in model.modules())


def test_a_fully_packed_engine_batches_exactly(tiny_llama_path):
    prompts = [tokens(21, 3), tokens(22, 30), tokens(23, 40), tokens(24, 11)]
    lengths = [12, 7, 15, 10]
    alone = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, max_batch=1, pack_min_bytes=None)
    expected = [alone.generate(req(p, n)).token_ids for p, n in zip(prompts, lengths)]
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, max_batch=4, pack_min_bytes=0)
    assert engine.metrics()["packed_weight_bytes"] > 0
    assert engine.batch_check_diff <= 1e-4
    results = run_concurrently(engine, [req(p, n) for p, n in zip(prompts, lengths)])
    assert [r.token_ids for r in results] == expected
    assert engine.metrics()["peak_decode_batch"] >= 2


@pytest.mark.skipif(not cpu_linear.onednn_available(torch.bfloat16), reason="no oneDNN bfloat16 on this CPU")
def test_bfloat16_engine_runs_on_packed_weights_close_to_float32(tiny_llama_path):
    prompt = tokens(5, 40)
    f32 = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096)
    bf16 = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, dtype="bfloat16")
    assert any(isinstance(m, cpu_linear.PackedLinear) for m in bf16.model.modules())
    assert bf16.metrics()["packed_weight_bytes"] > 0
    # The step layouts timed for bfloat16: the weights as stored (oneDNN's packed copies) and the
    # engine's own kernel where it builds; the BLAS copies are float32 only.
    timed = {name for times in bf16.step_layouts.step_ms.values() for name in times}
    assert timed == ({"as stored", "GEMV kernel"} if shutil.which("cc") else set())
    assert not any(isinstance(m, cpu_linear.PackedLinear) for m in f32.model.modules())  # its matrices are small
    # The fast decode step's concatenated projections run packed too.
    assert bf16.fast_decoder is not None and bf16.fast_decoder.packed_bytes > 0
    assert isinstance(bf16.fast_decoder.layers[0].qkv, cpu_linear.PackedLinear)
    reference, _ = f32.prefill_logits(prompt)
    logits, _ = bf16.prefill_logits(prompt)
    scale = float(reference.abs().max())
    assert float((logits - reference).abs().max()) <= 0.05 * scale
    # Served from the cache, bfloat16 logits stay those of its own recompute.
    again, cached = bf16.prefill_logits(prompt)
    assert cached == len(prompt) - 1
    assert float((again[-1] - logits[-1]).abs().max()) <= 0.02 * scale


def test_the_decode_thread_reports_the_torch_threads_it_runs_on(tiny_llama_path):
    try:
        engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, threads=1)
        assert engine.metrics()["decode_threads"] == 0  # no request yet: no worker thread
        engine.generate(req(tokens(9, 5), 2))
        assert engine.metrics()["decode_threads"] == 1  # `--threads 1`, whatever the CPUs
    finally:
        cpu_threads.configure(None)


needs_mkl_packed = pytest.mark.skipif(not cpu_linear.mkl_packed_available(), reason="torch built without MKL")


def transposed_linear(n_in: int, n_out: int, bias: bool) -> nn.Linear:
    linear = nn.Linear(n_in, n_out, bias=bias)
    with torch.no_grad():  # stored `[in, out]`, as `store_transposed` leaves the engine's weights
        linear.weight = nn.Parameter(linear.weight.detach().t().contiguous().t(), requires_grad=False)
    return linear


@needs_mkl_packed
def test_batch_packed_products_equal_the_linears_for_their_row_counts():
    torch.manual_seed(0)
    linears = [nn.Linear(96, 300), transposed_linear(96, 1000, bias=False), transposed_linear(300, 96, bias=True)]
    products, extra = cpu_linear.pack_for_batch_sizes(linears, [4, 2], 1 << 30)
    assert sorted(products) == [2, 4]
    assert extra == 2 * sum(lin.weight.numel() * 4 for lin in linears)
    with torch.inference_mode():
        for rows, found in products.items():
            for product, linear in zip(found, linears):
                x = torch.randn(rows, linear.in_features)
                assert float((product(x) - linear(x)).abs().max()) <= 1e-5


def test_row_major_products_equal_the_linears_at_two_and_three_rows():
    torch.manual_seed(0)
    linears = [nn.Linear(96, 300), transposed_linear(96, 1000, bias=False), transposed_linear(300, 96, bias=True)]
    products, extra = cpu_linear.row_major_products(linears, 1 << 30)
    assert len(products) == 3
    assert extra == (1000 * 96 + 300 * 96 + 96 * 300) * 4 - 300 * 96 * 4  # the first is row-major already
    with torch.inference_mode():
        for rows in (2, 3, 1, 5):
            for product, linear in zip(products, linears):
                x = torch.randn(rows, linear.in_features)
                assert float((product(x) - linear(x)).abs().max()) <= 1e-5


def test_row_major_copies_fit_the_budget_share_tied_weights_and_only_float32():
    first = transposed_linear(64, 512, bias=False)
    tied = nn.Linear(64, 512, bias=False)
    tied.weight = first.weight
    size = 512 * 64 * 4
    products, extra = cpu_linear.row_major_products([first, tied], size)
    assert len(products) == 2 and extra == size  # one copy for the shared weight
    assert cpu_linear.row_major_products([first], size - 1) == ([], 0)
    assert cpu_linear.row_major_products([nn.Linear(64, 512).to(torch.bfloat16)], 1 << 30) == ([], 0)


def test_a_row_major_copy_that_disagrees_is_not_used(monkeypatch):
    real = torch.Tensor.contiguous
    monkeypatch.setattr(torch.Tensor, "contiguous", lambda self, *a, **k: real(self, *a, **k) * 1.001)
    assert cpu_linear.row_major_products([transposed_linear(64, 512, bias=False)], 1 << 30) == ([], 0)


@needs_mkl_packed
def test_batch_packs_fit_the_budget_and_only_float32():
    linears = [nn.Linear(64, 512), nn.Linear(512, 64)]
    one_size = sum(lin.weight.numel() * 4 for lin in linears)
    assert list(cpu_linear.pack_for_batch_sizes(linears, [8, 4, 2], one_size)[0]) == [8]  # most rows first
    assert list(cpu_linear.pack_for_batch_sizes(linears, [8, 4, 2], 2 * one_size + 1)[0]) == [8, 4]
    assert cpu_linear.pack_for_batch_sizes(linears, [8, 4, 2], one_size - 1) == ({}, 0)
    assert cpu_linear.pack_for_batch_sizes([nn.Linear(64, 512).to(torch.bfloat16)], [4], 1 << 30) == ({}, 0)


@needs_mkl_packed
def test_a_packed_copy_that_disagrees_is_not_used(monkeypatch):
    def off_by_a_little(linear, sizes):
        return {rows: (lambda x: linear(x) * 1.001) for rows in sizes}
    monkeypatch.setattr(cpu_linear, "_packed_products", off_by_a_little)
    assert cpu_linear.pack_for_batch_sizes([nn.Linear(64, 512)], [4], 1 << 30) == ({}, 0)


def test_steps_on_the_chosen_layouts_generate_what_each_request_alone_does(tiny_llama_path):
    """Four requests started together (4 rows), ending at different lengths (3, 2, then 1 row),
    each step on the layout tuned for its row count, give each request its single-request
    tokens."""
    prompts = [tokens(31 + i, 20) for i in range(4)]
    lengths = [14, 9, 12, 6]
    alone = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, max_batch=1, pack_min_bytes=None)
    assert alone.step_layouts.chosen == {}  # no copies allowed: every step on the weights as stored
    expected = [alone.generate(req(p, n)).token_ids for p, n in zip(prompts, lengths)]
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, max_batch=4)
    assert sorted(engine.step_layouts.chosen) == [1, 2, 3, 4]
    assert engine.metrics()["packed_weight_bytes"] >= engine.step_layouts.nbytes
    results = run_concurrently(engine, [req(p, n) for p, n in zip(prompts, lengths)])
    assert [r.token_ids for r in results] == expected
    assert engine.metrics()["peak_decode_batch"] == 4
