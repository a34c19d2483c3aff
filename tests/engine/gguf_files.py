"""Small GGUF files with quantized matrices, written the way llama.cpp's converter lays a model out
(llama.cpp tensor names, Llama Q/K rows permuted into its rotary order, no output matrix when the
head is tied), from a tiny random model folder of `hitrate.engine.tiny`.

Matrices take the types in `types` in turn: the ones `gguf.quants.quantize` implements are the
model's own weights quantized; for the others (the K-quants, Q8_K) the blocks are random with
small scales, which is what a kernel must multiply correctly too. Norms and biases stay F32.
"""

from __future__ import annotations

import json
from itertools import cycle
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

from hitrate.engine.tiny import add_gguf_tokenizer, llama_cpp_rotary_order

ALL_TYPES = (Q.Q4_K, Q.Q5_0, Q.Q6_K, Q.Q8_0, Q.Q4_0, Q.Q8_K, Q.F16, Q.BF16)
_PER_LAYER = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
              "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
              "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def random_blocks(qtype: Q, rows: int, columns: int, rng: np.random.Generator) -> np.ndarray:
    """uint8 `[rows, row bytes]` of random blocks whose scale fields are small finite values."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    data = rng.integers(0, 256, size=(rows, columns // block, size), dtype=np.uint8)
    if qtype == Q.Q4_K:  # f16 d and dmin first
        data[..., 0:4] = rng.uniform(1e-4, 1e-3, size=(rows, columns // block, 2)).astype(np.float16).view(np.uint8)
    elif qtype == Q.Q6_K:  # f16 d last
        data[..., 208:210] = rng.uniform(1e-4, 1e-3, size=(rows, columns // block, 1)).astype(np.float16).view(np.uint8)
    elif qtype == Q.Q8_K:  # f32 d first
        data[..., 0:4] = rng.uniform(1e-4, 1e-3, size=(rows, columns // block, 1)).astype(np.float32).view(np.uint8)
    else:
        raise ValueError(f"no random block layout for {qtype.name}")
    return data.reshape(rows, -1)


def stored(values: np.ndarray, qtype: Q, rng: np.random.Generator) -> np.ndarray:
    """`values` (a float32 matrix) as `qtype` stores them (random blocks where gguf cannot quantize)."""
    if qtype in (Q.Q4_K, Q.Q6_K, Q.Q8_K):
        return random_blocks(qtype, values.shape[0], values.shape[1], rng)
    return gguf.quants.quantize(values, qtype)


def write_quantized_gguf(folder: str | Path, out_path: str | Path, types=ALL_TYPES, seed: int = 0) -> Path:
    """The Llama or Qwen2 model in `folder` as a GGUF at `out_path` (see the module docstring). A
    Qwen2 model is written with a tied head (no output matrix), as Qwen2.5 0.5B/1.5B ship."""
    from safetensors.numpy import load_file

    folder, out = Path(folder), Path(out_path)
    config = json.loads((folder / "config.json").read_text())
    arch = config["model_type"]
    if arch not in ("llama", "qwen2"):
        raise ValueError("writes Llama and Qwen2 models only")
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    weights = load_file(str(folder / "model.safetensors"))
    heads, kv_heads, hidden = config["num_attention_heads"], config["num_key_value_heads"], config["hidden_size"]

    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_name(folder.name)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(hidden // heads)
    rope = config.get("rope_theta") or config.get("rope_parameters", {}).get("rope_theta", 10000.0)
    writer.add_rope_freq_base(float(rope))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    add_gguf_tokenizer(writer, tok, tok_config, config)

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    if arch == "llama":
        names["lm_head.weight"] = "output.weight"
    for i in range(config["num_hidden_layers"]):
        for hf, cpp in _PER_LAYER.items():
            for kind in ("weight", "bias"):
                names[f"model.layers.{i}.{hf}.{kind}"] = f"blk.{i}.{cpp}.{kind}"
    rng = np.random.default_rng(seed)
    kinds = cycle(types)
    for hf_name, cpp_name in names.items():
        if hf_name not in weights:
            continue
        w = weights[hf_name].astype(np.float32)
        if arch == "llama" and ".attn_q." in cpp_name:
            w = llama_cpp_rotary_order(w, heads)
        elif arch == "llama" and ".attn_k." in cpp_name:
            w = llama_cpp_rotary_order(w, kv_heads)
        if w.ndim == 2:
            qtype = next(kinds)
            writer.add_tensor(cpp_name, stored(np.ascontiguousarray(w), qtype, rng), raw_dtype=qtype)
        else:
            writer.add_tensor(cpp_name, np.ascontiguousarray(w))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
