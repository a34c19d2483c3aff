"""GGUF files as shipped: quantized matrices stay in their blocks (`engine.gguf_load`).

Small Llama and Qwen2 files with every quantization type the kernels take are written by
`gguf_files.write_quantized_gguf` and loaded through `TransformersEngine.from_pretrained`, the
path a real file takes. The quantized model must compute what the same weights dequantized to
float32 compute (only the summation order differs), hold no float copy of a quantized matrix, and
stay exact under the prefix cache.
"""

from __future__ import annotations

import pytest
import torch
from gguf import GGMLQuantizationType as Q

from gguf_files import ALL_TYPES, write_quantized_gguf
from hitrate.engine import loading, memory_budget
from hitrate.engine.api import EngineError
from hitrate.engine.gguf_load.loader import load_gguf
from hitrate.engine.quant import QuantEmbedding, QuantLinear
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.verify import verify

# K-quants need rows of whole 256-value blocks.
SHAPE = dict(hidden=256, heads=4, kv_heads=2, intermediate=512, layers=2)
# Logits of the quantized path against the dequantized float32 model: the same weights, products
# summed in another order (float32 rounding over a 512-long row), relative to the logits' span.
RELATIVE_BOUND = 1e-4


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def quantized_file(request, tiny_model_factory, tmp_path_factory):
    folder = tiny_model_factory(request.param, **SHAPE)
    return write_quantized_gguf(folder, tmp_path_factory.mktemp("gguf") / f"tiny-{request.param}-q.gguf")


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def transformers_readable_file(request, tiny_model_factory, tmp_path_factory):
    """Every type but Q8_K, which transformers' GGUF loader (the `gguf` package) cannot dequantize."""
    folder = tiny_model_factory(request.param, **SHAPE)
    return write_quantized_gguf(folder, tmp_path_factory.mktemp("gguf") / f"tiny-{request.param}-tq.gguf",
                                types=[t for t in ALL_TYPES if t != Q.Q8_K])


def _logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def test_the_quantized_model_computes_what_its_dequantized_weights_compute(quantized_file):
    shipped = TransformersEngine.from_pretrained(quantized_file, pool_tokens=1024, max_batch=2)
    reference = TransformersEngine.from_pretrained(quantized_file, dtype="float32", pool_tokens=1024, max_batch=1,
                                                   pack_min_bytes=None, fast_decode=False)
    quantized = [m for m in shipped.model.modules() if isinstance(m, QuantLinear)]
    assert len(quantized) == 2 * 7 + 1  # every projection and the head
    assert {m.qtype for m in quantized} >= set(ALL_TYPES) - {Q.F16, Q.BF16} or len(quantized) < len(ALL_TYPES)
    ids = shipped.tokenizer("def add(a, b):\n    return a + b  # café", add_special_tokens=True)["input_ids"]
    ours, theirs = _logits(shipped.model, ids), _logits(reference.model, ids)
    span = float(theirs.abs().max())
    assert span > 0.1  # logits that vary enough for the comparison to mean something
    assert float((ours - theirs).abs().max()) <= RELATIVE_BOUND * span
    assert torch.equal(ours.argmax(-1), theirs.argmax(-1))


def test_each_matrix_holds_what_transformers_dequantizes_from_the_file(transformers_readable_file):
    """transformers' own GGUF loader (dequantizing, and undoing llama.cpp's Q/K permutation on
    the values) is the independent reference for where every stored row went."""
    from transformers import AutoModelForCausalLM

    path = transformers_readable_file
    ours = load_gguf(path).model
    theirs = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                  dtype=torch.float32)
    expected = dict(theirs.named_parameters(remove_duplicate=False))
    for name, module in ours.named_modules():
        if isinstance(module, (QuantLinear, QuantEmbedding)):
            assert torch.equal(module.dequantize(), expected[f"{name}.weight"]), name
            if isinstance(module, QuantLinear) and module.bias is not None:
                assert torch.equal(module.bias, expected[f"{name}.bias"]), name
    for name, param in ours.named_parameters():
        assert torch.equal(param, expected[name]), name


def test_no_float_copy_of_a_quantized_matrix_is_kept(quantized_file):
    loaded = load_gguf(quantized_file)
    model = loaded.model
    float_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) + sum(
        m.bias.numel() * 4 for m in model.modules() if isinstance(m, QuantLinear) and m.bias is not None)
    dequantized_bytes = sum(m.out_features * m.in_features * 4 for m in model.modules() if isinstance(m, QuantLinear))
    # Only norms (and Qwen2's biases) are float: a few KiB against the matrices' MiB.
    assert float_bytes < dequantized_bytes / 100
    blocks = sum(m.weight_nbytes for m in {id(m.blocks): m for m in model.modules()
                                         if isinstance(m, (QuantLinear, QuantEmbedding))}.values())
    # ... and the rotary tables, the one other buffer
    assert blocks + float_bytes <= loaded.weight_bytes <= blocks + float_bytes + 4096
    assert loaded.weight_bytes < quantized_file.stat().st_size
    if "qwen2" in quantized_file.name:  # tied head: the embedding's own blocks, not a copy
        assert model.lm_head.blocks.data_ptr() == model.model.embed_tokens.blocks.data_ptr()


def test_cache_served_logits_equal_a_recompute_on_the_quantized_path(quantized_file):
    engine = TransformersEngine.from_pretrained(quantized_file, pool_tokens=2048, max_batch=2)
    report = verify(engine)
    assert report.cached_tokens > 0 and report.max_logit_diff <= 1e-4
    assert report.dtype == "float32" and report.weights == "gguf"
    # decode steps straight from the blocks (`fast_decode.SideBySide`), checked against a full forward
    assert report.fast_decode and report.fast_decode_check_diff <= 1e-4


def test_the_memory_check_refuses_with_the_option_to_lower(quantized_file, monkeypatch):
    monkeypatch.setattr(memory_budget, "available_bytes", lambda: 600 << 20)
    with pytest.raises(EngineError, match="--pool-tokens") as refused:
        TransformersEngine.from_pretrained(quantized_file, pool_tokens=1 << 20)
    assert "only 0.59 GiB is available" in str(refused.value)
    with pytest.raises(EngineError, match="--dtype gguf"):  # dequantized weights: keeping them as shipped helps
        TransformersEngine.from_pretrained(quantized_file, dtype="float32", pool_tokens=1 << 20)
    monkeypatch.setattr(memory_budget, "available_bytes", lambda: 4 << 30)
    TransformersEngine.from_pretrained(quantized_file, pool_tokens=1024, max_batch=1)


def test_the_memory_plan_counts_weights_pool_and_copies():
    plan = memory_budget.MemoryPlan(weights=1 << 30, pool=1 << 30, copies=2 << 30)
    assert plan.total == (4 << 30) + memory_budget.HEADROOM_BYTES
    memory_budget.check(plan, available=plan.total)
    with pytest.raises(memory_budget.MemoryBudgetError, match="--copy-budget"):
        memory_budget.check(plan, available=plan.total - 1)


def test_as_shipped_weights_are_a_cpu_choice():
    assert loading.gguf_weights_dtype(None, torch.device("cpu")) is None
    assert loading.gguf_weights_dtype("gguf", torch.device("cpu")) is None
    assert loading.gguf_weights_dtype("float32", torch.device("cpu")) == torch.float32
    with pytest.raises(EngineError, match="quantized kernels run on the CPU"):
        loading.gguf_weights_dtype("gguf", torch.device("cuda"))
    with pytest.raises(EngineError, match="not a .gguf file"):
        loading.resolve_dtype("gguf", torch.device("cpu"))
