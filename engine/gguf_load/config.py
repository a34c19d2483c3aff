"""The transformers config and tokenizer a GGUF file describes, from metadata read once.

Both reuse transformers' own GGUF tables (`GGUF_CONFIG_MAPPING`, `GGUF_TOKENIZER_MAPPING`) and
tokenizer builders (`convert_gguf_tokenizer`); only the file read differs (`reader.GGUFFile`),
which is what made `AutoConfig`/`AutoTokenizer.from_pretrained(gguf_file=...)` take most of a
start. Architectures whose config needs more than the table (MoE, T5, ...) go through
transformers' own reader.
"""

from __future__ import annotations

from hitrate.engine.gguf_load.reader import GGUFFile

# llama.cpp writes no output matrix for these even though they have one (transformers' rule).
_ALWAYS_TIED = ("falcon", "bloom")
# GGUF architecture names whose transformers model type differs.
_MODEL_TYPES = {"gemma3": "gemma3_text"}
_TABLE_ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "starcoder2", "stablelm")


def transformers_config(file: GGUFFile):
    """The `PretrainedConfig` transformers derives from this file's metadata."""
    from transformers import AutoConfig
    from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING, GGUF_CONFIG_MAPPING

    architecture = file.architecture
    if architecture not in _TABLE_ARCHITECTURES or architecture not in GGUF_CONFIG_MAPPING:
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

        return AutoConfig.for_model(**load_gguf_checkpoint(str(file.path), return_tensors=False)["config"])
    # transformers reads a llama file named "mistral" as Mistral (same weights, other defaults).
    model_arch = "mistral" if architecture == "llama" and file.metadata.get("general.name") == "mistral" else architecture
    values: dict[str, object] = {
        "tie_word_embeddings": "output.weight" not in file.tensors or architecture in _ALWAYS_TIED,
        **GGUF_CONFIG_DEFAULTS_MAPPING.get(model_arch, {}),
    }
    for key, value in file.metadata.items():
        prefix, _, rest = key.replace(architecture, model_arch, 1).partition(".")
        target = GGUF_CONFIG_MAPPING.get(prefix, {}).get(rest)
        if target is None or target == -1:
            continue
        if isinstance(value, str) and architecture in value:
            value = value.replace(architecture, model_arch)
        values[target] = value
    values["model_type"] = _MODEL_TYPES.get(str(values.get("model_type")), values.get("model_type"))
    if "vocab_size" not in values:
        tokens = file.metadata.get("tokenizer.ggml.tokens")
        if tokens is not None:
            values["vocab_size"] = len(tokens) if isinstance(tokens, list) else int(tokens)
    return AutoConfig.for_model(**values)


def tokenizer(file: GGUFFile):
    """The fast tokenizer the file's vocabulary, merges and special tokens describe, with its chat
    template (`tokenizer.chat_template`, the key llama.cpp reads)."""
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.gguf import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

    metadata = file.metadata
    grouped = {
        group: {name: metadata[f"tokenizer.{key}"] for key, name in renames.items() if f"tokenizer.{key}" in metadata}
        for group, renames in GGUF_TOKENIZER_MAPPING.items()
    }
    vocab, settings = grouped["tokenizer"], grouped["tokenizer_config"]
    if "tokens" not in vocab:
        raise ValueError(f"{file.path} holds no tokenizer (no tokenizer.ggml.tokens in its metadata)")
    if vocab.get("tokenizer_type") == "llama":
        settings.setdefault("add_bos_token", True)  # llama.cpp's default for a sentencepiece vocabulary
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                      ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id")):
        token_id = metadata.get(f"tokenizer.ggml.{key}")
        if isinstance(token_id, int) and 0 <= token_id < len(vocab["tokens"]):
            settings[name] = vocab["tokens"][token_id]
    backend, extra = convert_gguf_tokenizer(file.architecture, vocab)
    return PreTrainedTokenizerFast(tokenizer_object=backend, **settings, **extra)
