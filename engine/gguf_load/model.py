"""The transformers model a GGUF file holds, built without float copies of its quantized matrices.

The skeleton is built on the meta device (`accelerate.init_empty_weights`: parameters only, so
buffers such as the rotary tables are real), then each tensor of the file goes where transformers'
GGUF name map (`get_gguf_hf_weights_map`, with the architecture's `TensorProcessor`) puts it:

- as shipped (`dtype=None`): a quantized matrix of a linear layer becomes a `QuantLinear` over
  the file's rows (a view of the memory map, no copy), the token embedding a `QuantEmbedding`,
  and a tied output head a `QuantLinear` over the embedding's own blocks; everything else (norms,
  biases, float matrices) becomes a float32 parameter.
- dequantized (`dtype` float32 or bfloat16): every tensor as `dtype` values, the exact reference.

llama.cpp permutes the Q/K rows of Llama-family models into its rotary order; transformers'
processor undoes it on values. A permutation of output rows moves whole rows, so the same
processor applied to the row numbers gives the order in which to take the stored rows.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from hitrate.engine.gguf_load.reader import GGUFFile


class GGUFModelError(ValueError):
    """The file's tensors do not fit the model its metadata describes."""


def build_model(file: GGUFFile, config, dtype: torch.dtype | None = None) -> nn.Module:
    """The causal LM of `file` (config from `gguf_load.config.transformers_config`); `dtype` None
    keeps quantized matrices in their blocks (see the module docstring)."""
    import gguf
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor

    from hitrate.engine.quant import QuantEmbedding, QuantLinear, supported_types

    float_dtype = dtype or torch.float32
    with init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(config, dtype=float_dtype)
    processor = TENSOR_PROCESSORS.get(file.architecture, TensorProcessor)(config=config.to_dict())
    name_map = _gguf_to_model_names(file, model, processor)
    modules = dict(model.named_modules())
    keep_blocks = set() if dtype is not None else supported_types() - {gguf.GGMLQuantizationType.F32}

    quantized: dict[str, tuple[int, torch.Tensor]] = {}  # module path -> (qtype, blocks)
    floats: dict[str, torch.Tensor] = {}  # parameter name -> values
    for name, slot in file.tensors.items():
        target = name_map.get(name)
        if target is None:
            continue  # e.g. rope frequency tables llama.cpp precomputes; transformers computes its own
        path, _, attr = target.rpartition(".")
        owner = modules.get(path)
        if (attr == "weight" and slot.qtype in keep_blocks and len(slot.shape) == 2
                and isinstance(owner, (nn.Linear, nn.Embedding))):
            quantized[path] = (slot.qtype, _rows_in_model_order(file, name, processor))
        else:
            values = processor.process(weights=file.dequantized(name), name=name, tensor_key_mapping=name_map,
                                       parsed_parameters={"tensors": {}}).weights
            floats[target] = torch.from_numpy(np.ascontiguousarray(values)).to(float_dtype)

    # Found before any module is replaced: the model looks them up by its attribute names.
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    head_path = next((p for p, m in modules.items() if m is head), None)
    embed_path = next((p for p, m in modules.items() if m is embedding), None)
    for path, (qtype, blocks) in quantized.items():
        owner = modules[path]
        try:
            if isinstance(owner, nn.Embedding):
                module = QuantEmbedding(qtype, blocks, owner.num_embeddings, owner.embedding_dim)
                if hasattr(owner, "embed_scale"):  # Gemma scales its embeddings by sqrt(hidden)
                    module = ScaledEmbedding(module, float(owner.embed_scale))
            else:
                module = QuantLinear(qtype, blocks, owner.out_features, owner.in_features,
                                     bias=floats.pop(f"{path}.bias", None))
        except ValueError as exc:  # the stored rows do not have the model's shape
            raise GGUFModelError(f"{file.path}: {path}: {exc}") from exc
        _replace(model, path, module)

    if head_path is not None and f"{head_path}.weight" not in floats and head_path not in quantized:
        # No output matrix in the file: the head is the token embedding (llama.cpp ties this way).
        if embed_path in quantized:
            qtype, blocks = quantized[embed_path]
            _replace(model, head_path, QuantLinear(qtype, blocks, head.out_features, head.in_features,
                                                   bias=floats.pop(f"{head_path}.bias", None)))
        elif f"{embed_path}.weight" in floats:
            floats[f"{head_path}.weight"] = floats[f"{embed_path}.weight"]

    for target, values in floats.items():
        path, _, attr = target.rpartition(".")
        owner = model.get_submodule(path)
        current = getattr(owner, attr, None)
        if not isinstance(current, torch.Tensor) or tuple(current.shape) != tuple(values.shape):
            raise GGUFModelError(f"{file.path}: {target} is {tuple(values.shape)} in the file, "
                                 f"{None if current is None else tuple(current.shape)} in the model")
        if attr in owner._parameters:
            owner._parameters[attr] = nn.Parameter(values, requires_grad=False)
        else:
            owner._buffers[attr] = values
    missing = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if missing:
        raise GGUFModelError(f"{file.path} has no tensor for {', '.join(missing[:6])}"
                             f"{f' and {len(missing) - 6} more' if len(missing) > 6 else ''}")
    return model.eval()


def quantized(model: nn.Module) -> bool:
    """Whether any of the model's matrices is kept in GGUF blocks."""
    from hitrate.engine.quant.weights import QuantWeights

    return any(isinstance(m, QuantWeights) for m in model.modules())


def weight_nbytes(model: nn.Module) -> int:
    """Bytes the model's weights take in memory: quantized blocks once each (a tied head shares
    the embedding's), plus every parameter and buffer."""
    seen: dict[int, int] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        seen[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
    return sum(seen.values())


def planned_weight_nbytes(file: GGUFFile, dtype: torch.dtype | None) -> int:
    """What `build_model(file, ..., dtype)` will hold, from the tensor table alone: as shipped,
    the stored bytes of the matrices kept in blocks and float32 for the rest; dequantized, every
    value in `dtype`."""
    from hitrate.engine.quant import supported_types

    if dtype is not None:
        size = torch.empty((), dtype=dtype).element_size()
        return sum(int(np.prod(slot.shape)) * size for slot in file.tensors.values())
    kept = supported_types()
    return sum(slot.nbytes if slot.qtype in kept and len(slot.shape) == 2 and slot.type_name != "F32"
               else int(np.prod(slot.shape)) * 4 for slot in file.tensors.values())


class ScaledEmbedding(nn.Module):
    """An embedding whose rows come out multiplied by a constant (Gemma's `embed_scale`)."""

    def __init__(self, embedding: nn.Module, scale: float) -> None:
        super().__init__()
        self.embedding, self.scale = embedding, scale

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids) * torch.tensor(self.scale, dtype=torch.float32)


def _gguf_to_model_names(file: GGUFFile, model: nn.Module, processor) -> dict[str, str]:
    """GGUF tensor name -> the model's parameter name, by gguf's `TensorNameMap` for the file's
    architecture: what transformers' `get_gguf_hf_weights_map` computes, whose recursion into
    every submodule builds the map anew each time (24 s on Qwen2.5 0.5B); one map here."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map

    arch = next((key for key, value in MODEL_ARCH_NAMES.items() if value == file.architecture), None)
    if arch is None:
        raise GGUFModelError(f"{file.path}: the gguf package knows no architecture {file.architecture!r}")
    names = get_tensor_name_map(arch, int(model.config.num_hidden_layers))
    mapping = {}
    for model_name in model.state_dict(keep_vars=True):
        stem, dot, suffix = processor.preprocess_name(model_name).rpartition(".")
        if suffix not in ("weight", "bias"):
            stem, dot, suffix = processor.preprocess_name(model_name), "", ""
        gguf_name = names.get_name(stem)
        if gguf_name is not None:
            mapping[gguf_name + dot + suffix] = model_name
    return mapping


def _rows_in_model_order(file: GGUFFile, name: str, processor) -> torch.Tensor:
    """The stored rows of matrix `name` (a view of the map), or a copy in the model's row order
    where the architecture's processor reorders them."""
    rows = file.raw(name)
    index = np.arange(rows.shape[0], dtype=np.float64).reshape(-1, 1)
    order = processor.process(weights=index, name=name, tensor_key_mapping={}, parsed_parameters={"tensors": {}}).weights
    order = np.asarray(order).reshape(-1)
    if order.shape != (rows.shape[0],) or not np.array_equal(np.sort(order), index.reshape(-1)):
        raise GGUFModelError(f"{file.path}: {name} is transformed on load in a way other than reordering rows; "
                             "load it with --dtype float32")
    if np.array_equal(order, index.reshape(-1)):
        return torch.from_numpy(rows)
    return torch.from_numpy(np.ascontiguousarray(rows[order.astype(np.int64)]))


def _replace(model: nn.Module, path: str, module: nn.Module) -> None:
    parent_path, _, child = path.rpartition(".")
    setattr(model.get_submodule(parent_path) if parent_path else model, child, module)
