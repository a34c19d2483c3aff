"""`QuantLinear` and `QuantEmbedding` stand in for `nn.Linear` and `nn.Embedding` inside
transformers' own model code: a tiny Qwen2 model (biases on q/k/v, as Qwen2.5's) whose every
linear layer and embedding is swapped for the quantized modules over Q8_0 blocks of its weights
gives the logits of the same model holding those blocks' dequantized float32 weights."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from hitrate.engine.quant import QuantEmbedding, QuantLinear
from hitrate.engine.quant.formats import QuantType


def quantize(weight: torch.Tensor, qtype: QuantType) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(gguf.quants.quantize(weight.detach().float().numpy(), qtype)))


def swap_in_quantized(model: nn.Module, qtype: QuantType) -> None:
    """Every nn.Linear and nn.Embedding of `model` becomes the quantized module over `qtype` blocks
    of its weights; the float weights are set to those blocks' dequantized values, so the float
    model and the quantized one hold the same weights."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                blocks = quantize(child.weight, qtype)
                quant = QuantLinear(qtype, blocks, child.out_features, child.in_features, bias=child.bias)
            elif isinstance(child, nn.Embedding):
                blocks = quantize(child.weight, qtype)
                quant = QuantEmbedding(qtype, blocks, child.num_embeddings, child.embedding_dim)
            else:
                continue
            setattr(parent, name, quant)


@pytest.fixture
def qwen2(tiny_model_factory):
    folder = tiny_model_factory("qwen2")
    return lambda: AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def test_a_transformers_model_runs_on_the_quantized_modules(qwen2):
    quantized, reference = qwen2(), qwen2()
    swap_in_quantized(quantized, QuantType.Q8_0)
    with torch.no_grad():  # the reference holds the dequantized weights of the same blocks
        for (name, module), (_, ref) in zip(quantized.named_modules(), reference.named_modules()):
            if isinstance(module, (QuantLinear, QuantEmbedding)):
                ref.weight.copy_(module.dequantize())
    assert not any(isinstance(m, (nn.Linear, nn.Embedding)) for m in quantized.modules())
    ids = torch.tensor([[1, 5, 9, 200, 31, 7, 7, 100]])
    with torch.inference_mode():
        got = quantized(ids).logits  # 8 rows: the decode kernel; then one row, as a decode step
        want = reference(ids).logits
        step = quantized(ids[:, :1]).logits
    assert got.shape == want.shape == (1, 8, reference.config.vocab_size)
    assert float((got - want).abs().max()) <= 1e-4 * float(want.abs().max())
    assert float((step[0, 0] - want[0, 0]).abs().max()) <= 1e-4 * float(want.abs().max())
