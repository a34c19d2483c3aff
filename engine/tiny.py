"""Tiny random causal LMs with an offline tokenizer, saved as an ordinary model folder.

Tests, benchmarks and the offline demo load these through the same `from_pretrained` path as a real
checkpoint, so nothing downloads weights. The tokenizer is a byte-level BPE trained on a small
built-in corpus (every byte string stays encodable) and carries a ChatML / Hermes-style chat
template with `tools` and `tool_calls` support, in the shape Qwen2.5 uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The markup tokens the chat template emits. `<|im_end|>` ends a turn and is the eos token.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added as whole tokens but not "special": decoding with skip_special_tokens keeps them, so a
# tool-call parser still sees them in the generated text (Qwen2.5 does the same).
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."

# ChatML with Hermes tool calls. Differs from Qwen2.5's in one deliberate way: tool-call
# `arguments` given as an already-encoded JSON string (OpenAI wire format) are emitted verbatim
# instead of being JSON-encoded a second time.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}"
    "{%- else %}{{- '" + DEFAULT_SYSTEM_PROMPT + "' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\' }}'
    "{%- else %}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\n" + DEFAULT_SYSTEM_PROMPT + "<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first)"
    " or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Training text for the BPE merges: prose, code, JSON and chat markup, so common words and
# punctuation become single tokens and the tiny model's prompts are not all single bytes.
_CORPUS = [
    "The quick brown fox jumps over the lazy dog. A cache hit saves the prefill of the shared prefix.",
    "You are a helpful assistant. Answer the user's question using the tools when they help.",
    "def read_file(path: str) -> str:\n    with open(path) as handle:\n        return handle.read()\n",
    "import os\nimport sys\n\nfor name in sorted(os.listdir('.')):\n    print(name)\n",
    '{"name": "read_file", "arguments": {"path": "src/main.py"}}',
    '{"type": "function", "function": {"name": "search", "description": "Search the repository",'
    ' "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}',
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
    "<|im_start|>assistant\nHello! How can I help you today?<|im_end|>\n",
    "<tool_call>\n{\"name\": \"run\", \"arguments\": {\"command\": \"pytest -q\"}}\n</tool_call>",
    "<tool_response>\n3 passed in 0.12s\n</tool_response>",
    "The weather in Paris is sunny today, with a temperature of twenty degrees.",
    "Tests failed: assertion error in test_parser.py line 42; expected 3 but got 4.",
    "class Engine:\n    def generate(self, request):\n        return self.runner.run(request)\n",
    "Please fix the bug in the function and run the tests again. Then explain what changed.",
    "0123456789 +-*/=<>()[]{}:;,.!?'\"`~@#$%^&|\\ \t\n",
]


def build_tokenizer(vocab_size: int = 512, *, extra_corpus: list[str] | None = None):
    """A byte-level BPE `PreTrainedTokenizerFast` with ChatML special tokens and chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    minimum = 256 + len(SPECIAL_TOKENS) + len(MARKUP_TOKENS)
    if vocab_size < minimum:
        raise ValueError(f"vocab_size must be at least {minimum} (256 bytes + markup tokens), got {vocab_size}")
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(MARKUP_TOKENS),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = _CORPUS * 4 + list(extra_corpus or [])
    backend.train_from_iterator(corpus, trainer)
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=1 << 30,
        clean_up_tokenization_spaces=False,
    )


def _config_kwargs(
    arch: str, *, vocab_size: int, hidden: int, layers: int, heads: int, kv_heads: int, max_positions: int
) -> dict[str, Any]:
    """Constructor arguments for each supported config class (the names differ per family)."""
    if arch == "gpt2":
        return dict(
            vocab_size=vocab_size,
            n_embd=hidden,
            n_layer=layers,
            n_head=heads,
            n_positions=max_positions,
            n_inner=hidden * 4,
        )
    common = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=hidden * 3,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
    )
    # Sliding-window families: keep every layer full-attention unless the caller overrides it.
    if arch in ("qwen2", "qwen3"):
        common.update(use_sliding_window=False)
    if arch == "mistral":
        common.update(sliding_window=None)
    if arch in ("gemma2", "gemma3_text", "qwen3"):
        common.update(head_dim=hidden // heads)
    return common


SUPPORTED_ARCHS = ("llama", "qwen2", "qwen3", "mistral", "gpt2", "phi3", "gemma2", "gemma3_text")


def build_tiny_model(
    path: str | Path,
    arch: str = "llama",
    *,
    vocab_size: int = 512,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int | None = None,
    max_positions: int = 8192,
    seed: int = 0,
    initializer_range: float = 0.1,
    config_overrides: dict[str, Any] | None = None,
) -> Path:
    """Save a randomly initialised causal LM of family `arch` plus its tokenizer into `path`.

    `config_overrides` go straight into the config (e.g. `{"sliding_window": 16}`), which is how
    tests build models whose state cannot be cut at an arbitrary prefix. `initializer_range` is
    larger than the usual 0.02 so that logits vary enough for exactness checks to mean something.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"unknown arch {arch!r}; choose one of {', '.join(SUPPORTED_ARCHS)}")
    if hidden % heads or heads % kv_heads:
        raise ValueError("hidden must be divisible by heads and heads by kv_heads")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = build_tokenizer(min(vocab_size, 4096))
    model_vocab = max(vocab_size, len(tokenizer))
    kwargs = _config_kwargs(
        arch,
        vocab_size=model_vocab,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        max_positions=max_positions,
    )
    if intermediate is not None:
        kwargs["n_inner" if arch == "gpt2" else "intermediate_size"] = intermediate
    kwargs.update(
        initializer_range=initializer_range,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    kwargs.update(config_overrides or {})
    config = AutoConfig.for_model(arch, **kwargs)

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def count_parameters(path: str | Path) -> int:
    """Parameter count of a saved model (used by benchmarks to report model size)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path))
    return sum(p.numel() for p in model.parameters())


def write_tiny_gguf(folder: str | Path, out_path: str | Path) -> Path:
    """Write a tiny Llama folder from `build_tiny_model` as a GGUF file (f32 tensors, the byte-level
    BPE tokenizer and the chat template), laid out as llama.cpp's `convert_hf_to_gguf.py` writes
    a Llama: llama.cpp tensor names, and Q/K rows permuted into llama.cpp's rotary order (which
    transformers' GGUF loader undoes)."""
    import json

    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    folder, out = Path(folder), Path(out_path)
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise ValueError("write_tiny_gguf writes Llama models only")
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    weights = load_file(str(folder / "model.safetensors"))
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    hidden = config["hidden_size"]

    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(folder.name)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_rope_freq_base(float(config.get("rope_theta") or config.get("rope_parameters", {}).get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_gguf_tokenizer(writer, tok, tok_config, config)

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                 "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for i in range(config["num_hidden_layers"]):
        for hf, cpp in per_layer.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{cpp}.weight"
    for hf_name, cpp_name in names.items():
        if hf_name not in weights:
            continue
        w = weights[hf_name].astype(np.float32)
        if cpp_name.endswith("attn_q.weight"):
            w = llama_cpp_rotary_order(w, heads)
        elif cpp_name.endswith("attn_k.weight"):
            w = llama_cpp_rotary_order(w, kv_heads)
        writer.add_tensor(cpp_name, np.ascontiguousarray(w))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def llama_cpp_rotary_order(w, n_head: int):
    """Q/K rows as llama.cpp's converter writes a Llama's: each head's rotary halves interleaved."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def add_gguf_tokenizer(writer, tok: dict, tok_config: dict, config: dict) -> None:
    """The byte-level BPE tokenizer of `tokenizer.json` (`tok`) and its config as GGUF metadata:
    vocabulary padded to the model's vocab size, special tokens as control tokens, merges, the
    special ids and the chat template."""
    import gguf

    vocab = dict(tok["model"]["vocab"])
    specials = set()
    for added in tok.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
        if added.get("special"):
            specials.add(added["id"])
    size = max(config["vocab_size"], max(vocab.values()) + 1)
    tokens = [f"[PAD{i}]" for i in range(size)]
    for text, index in vocab.items():
        tokens[index] = text
    writer.add_vocab_size(size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i in specials else gguf.TokenType.NORMAL for i in range(size)])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
    writer.add_eos_token_id(vocab[tok_config["eos_token"]])
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_pad_token_id(vocab[tok_config["pad_token"]])
    writer.add_chat_template(tok_config.get("chat_template") or CHAT_TEMPLATE)
