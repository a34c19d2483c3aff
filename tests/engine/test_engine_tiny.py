"""The tiny offline models load through the ordinary `from_pretrained` path and render chats."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from hitrate.engine.tiny import build_tiny_model


def test_tiny_model_round_trips_through_from_pretrained(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    ids = tokenizer("def main():\n    print('hi') 😀")["input_ids"]
    assert tokenizer.decode(ids) == "def main():\n    print('hi') 😀"
    assert max(ids) < model.config.vocab_size
    logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), model.config.vocab_size)
    assert tokenizer.eos_token == "<|im_end|>"


def test_chat_template_renders_tools_and_tool_calls(tiny_llama_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "find it"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}],
        },
        {"role": "tool", "content": "found"},
    ]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert '<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\nfound\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n")
    # The markup tokens are single ids, kept by skip_special_tokens decoding.
    (tool_call_id,) = tokenizer("<tool_call>")["input_ids"]
    assert tokenizer.decode([tool_call_id], skip_special_tokens=True) == "<tool_call>"


def test_rejects_unknown_arch_and_tiny_vocab(tmp_path):
    with pytest.raises(ValueError, match="unknown arch"):
        build_tiny_model(tmp_path / "a", "not-a-model")
    with pytest.raises(ValueError, match="vocab_size"):
        build_tiny_model(tmp_path / "b", "llama", vocab_size=100)
