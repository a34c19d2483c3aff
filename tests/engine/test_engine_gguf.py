"""GGUF checkpoints: a tiny Llama written with the `gguf` package (as llama.cpp's converter lays it
out) loads through `TransformersEngine.from_pretrained(model.gguf)` with its tokenizer and chat
template, and computes what the original model computes."""

from __future__ import annotations

import pytest
import torch

from hitrate.engine.api import EngineError, GenerationRequest, SamplingParams
from hitrate.engine.chat import ChatFormat, ChatMessage
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.tiny import write_tiny_gguf


@pytest.fixture(scope="module")
def gguf_file(tiny_llama_path, tmp_path_factory):
    return write_tiny_gguf(tiny_llama_path, tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf")


def test_a_gguf_file_serves_what_the_original_model_computes(tiny_llama_path, gguf_file):
    from_gguf = TransformersEngine.from_pretrained(gguf_file, pool_tokens=2048)
    original = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=2048)
    assert from_gguf.model_name == "tiny-llama"
    assert from_gguf.tokenizer.chat_template  # carried over from the GGUF metadata
    messages = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hello, café!")]
    ids = ChatFormat(from_gguf.tokenizer).encode(messages, [])
    assert ids == ChatFormat(original.tokenizer).encode(messages, [])
    with torch.no_grad():
        diff = (from_gguf.model(torch.tensor([ids])).logits - original.model(torch.tensor([ids])).logits).abs().max()
    assert float(diff) <= 1e-5
    request = GenerationRequest(prompt_ids=ids, params=SamplingParams(max_tokens=8, ignore_eos=True))
    assert from_gguf.generate(request).token_ids == original.generate(request).token_ids


def test_a_missing_gguf_file_is_a_clear_error(tmp_path):
    with pytest.raises(EngineError, match="no GGUF file at"):
        TransformersEngine.from_pretrained(tmp_path / "absent.gguf")
