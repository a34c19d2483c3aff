"""Decode steps straight from the weights (`engine.fast_decode`): built for the layer shapes it
knows, checked against a full forward at load, refused with the reason otherwise, and the tokens
an engine generates with it equal transformers' own `generate` (greedy), past a sliding window
and in batches of rows of different lengths."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from hitrate.engine import modelinfo
from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.batch_kv import BatchKV
from hitrate.engine.fast_decode import (
    FastDecodeUnsupported, _plain_product, build_fast_decoder, check_fast_decoder,
)
from hitrate.engine.fast_norms import fused_qk_norm, norm
from hitrate.engine.runner import TransformersEngine

SLIDING = {"sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"]}
KNOWN = ["llama", "qwen2", "qwen3", "mistral", "phi3", "gemma3_sliding"]


def tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 500) for _ in range(n)]


def model_path(factory, arch: str):
    if arch == "gemma3_sliding":
        return factory("gemma3_text", config_overrides=SLIDING)
    return factory(arch)


@pytest.mark.parametrize("arch", KNOWN)
def test_known_layer_shapes_decode_fast_and_generate_what_transformers_generates(tiny_model_factory, arch):
    path = model_path(tiny_model_factory, arch)
    engine = TransformersEngine.from_pretrained(path, pool_tokens=4096)
    assert engine.metrics()["fast_decode"] == 1, engine.fast_decode_off_reason
    assert engine.fast_decoder.check_diff <= 1e-4
    reference = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompt = tokens(1, 23)  # with 20 new tokens, well past the 16-token window
    with torch.no_grad():
        expected = reference.generate(torch.tensor([prompt]), max_new_tokens=20, min_new_tokens=20, do_sample=False)
    result = engine.generate(GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=20, ignore_eos=True)))
    assert result.token_ids == expected[0, len(prompt):].tolist()


@pytest.mark.parametrize(("arch", "reason"), [("gpt2", "model.embed_tokens"), ("gemma2", "soft-capping")])
def test_other_layer_shapes_keep_the_model_forward_and_say_why(tiny_model_factory, arch, reason):
    engine = TransformersEngine.from_pretrained(tiny_model_factory(arch), pool_tokens=4096)
    assert engine.fast_decoder is None and engine.metrics()["fast_decode"] == 0
    assert reason in engine.fast_decode_off_reason
    out = engine.generate(GenerationRequest(prompt_ids=tokens(2, 9), params=SamplingParams(max_tokens=4, ignore_eos=True)))
    assert len(out.token_ids) == 4


def test_turned_off_on_request(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096, fast_decode=False)
    assert engine.fast_decoder is None and engine.fast_decode_off_reason == "turned off"


def test_a_step_that_disagrees_with_the_full_forward_is_refused(tiny_llama_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_path, dtype=torch.float32).eval()
    layout = modelinfo.kv_layout(model)
    decoder = build_fast_decoder(model, layout.layer_types, layout.windows)
    assert check_fast_decoder(decoder, model, layout) <= 1e-4
    decoder.layers[0].scale = decoder.layers[0].scale * 2  # a wrong attention scale
    with pytest.raises(FastDecodeUnsupported, match="differ from a full forward"):
        check_fast_decoder(decoder, model, layout)


@pytest.mark.parametrize("arch", ["llama", "gemma3_sliding"])
def test_rows_at_the_same_position_step_as_a_full_forward(tiny_model_factory, arch):
    """Rows started together sit at one position: their K/V go in with one strided copy
    rather than an indexed write, and each row's logits still equal its own full forward."""
    model = AutoModelForCausalLM.from_pretrained(model_path(tiny_model_factory, arch), dtype=torch.float32).eval()
    layout = modelinfo.kv_layout(model)
    decoder = build_fast_decoder(model, layout.layer_types, layout.windows)
    fed = [tokens(10 + r, 18) for r in range(3)]  # past the 16-token window on the sliding layer
    kv = BatchKV(layout.shape, rows=3, capacity=4, device=torch.device("cpu"), layer_types=layout.layer_types,
                 windows=layout.windows)
    with torch.inference_mode():
        kv.prefill_rows(model, fed)
        for step in range(3):
            kv.ensure_capacity(max(kv.lengths) + 1)
            nxt = [tokens(20 + step, 3)[r] for r in range(3)]
            logits = decoder.decode_rows(kv, nxt)
            for r in range(3):
                kv.lengths[r] += 1
                fed[r].append(nxt[r])
                full = model(input_ids=torch.tensor([fed[r]])).logits[0, -1]
                assert torch.allclose(logits[r], full, atol=1e-4), (step, r)


def test_the_projections_share_the_concatenated_weights(tiny_llama_path):
    """No weight is stored twice: q/k/v and gate/up become views of the concatenated matrices."""
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_path, dtype=torch.float32).eval()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    layout = modelinfo.kv_layout(model)
    decoder = build_fast_decoder(model, layout.layer_types, layout.windows)
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    fused_qkv = decoder.layers[0].qkv.weight
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
        assert proj.weight.untyped_storage().data_ptr() == fused_qkv.untyped_storage().data_ptr()
    assert mlp.up_proj.weight.untyped_storage().data_ptr() == decoder.layers[0].gate_up.weight.untyped_storage().data_ptr()
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name  # same values


def test_a_norm_of_another_formula_is_called_as_the_module():
    layer_norm = nn.LayerNorm(8)  # subtracts the mean: neither RMSNorm formula reproduces it
    assert norm(layer_norm) is layer_norm


@pytest.mark.parametrize("arch", ["gemma3_sliding", "qwen3"])
def test_the_query_and_key_norms_run_as_one_with_the_same_values(tiny_model_factory, arch):
    """Gemma 3 and Qwen3 normalize each query and key head: the step runs both as one norm over
    the heads side by side, equal bit for bit to the model's own two norm modules."""
    model = AutoModelForCausalLM.from_pretrained(model_path(tiny_model_factory, arch), dtype=torch.float32).eval()
    layout = modelinfo.kv_layout(model)
    decoder = build_fast_decoder(model, layout.layer_types, layout.windows)
    heads, kv_heads, dim = decoder.heads, decoder.kv_heads, decoder.head_dim
    x = torch.randn(5, heads + kv_heads, dim, generator=torch.Generator().manual_seed(3)) * 4
    for layer, module in zip(decoder.layers, model.model.layers):
        assert layer.qk_norm is not None
        attn = module.self_attn
        with torch.no_grad():
            expected = torch.cat((attn.q_norm(x[:, :heads]), attn.k_norm(x[:, heads:])), dim=1)
            assert torch.equal(layer.qk_norm(x), expected)


def test_query_and_key_norms_that_cannot_share_one_norm_stay_apart(tiny_model_factory):
    model = AutoModelForCausalLM.from_pretrained(model_path(tiny_model_factory, "qwen3"), dtype=torch.float32).eval()
    attn = model.model.layers[0].self_attn
    attn.k_norm.variance_epsilon = attn.q_norm.variance_epsilon * 10  # one norm has one epsilon
    config = model.config
    assert fused_qk_norm(attn, norm(attn.q_norm), norm(attn.k_norm), config.num_attention_heads,
                          config.num_key_value_heads) is None


@pytest.mark.parametrize("bias", [False, True])
def test_a_linear_runs_as_the_product_the_module_computes(bias):
    linear = nn.Linear(24, 40, bias=bias)
    with torch.no_grad():  # stored `[in, out]` as the engine keeps float32 weights on a CPU
        linear.weight = nn.Parameter(linear.weight.detach().t().contiguous().t(), requires_grad=False)
    x = torch.randn(3, 24)
    with torch.no_grad():
        assert torch.equal(_plain_product(linear)(x), linear(x))
    packed = nn.Sequential(nn.Linear(24, 40))  # anything else is called as the module
    assert _plain_product(packed) is packed


def test_the_layer_views_follow_the_buffer_when_it_grows(tiny_llama_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_path, dtype=torch.float32).eval()
    layout = modelinfo.kv_layout(model)
    kv = BatchKV(layout.shape, rows=1, capacity=4, device=torch.device("cpu"), layer_types=layout.layer_types,
                 windows=layout.windows)
    first = kv.layer_views()
    assert kv.layer_views() is first  # taken once per buffer
    kv.ensure_capacity(9)
    kv.ensure_rows(3)
    keys, values = kv.layer_views()[1]
    assert keys.shape == (3, layout.shape.kv_heads, kv.capacity, layout.shape.head_dim)
    keys[2, 0, 8].fill_(1.5)
    values[1, 0, 7].fill_(-2.0)
    assert bool((kv.buffer[1, 0, 2, 0, 8] == 1.5).all()) and bool((kv.buffer[1, 1, 1, 0, 7] == -2.0).all())
