"""What the runner needs to know about a loaded transformers model before caching its K/V.

- `kv_layout`: the per-layer K/V shape, found by running the model once and reading the cache it
  filled (robust across families that name their config fields differently), and a refusal for
  any layer whose state is not plain attention K/V (recurrent / convolutional / linear-attention
  state, cross-layer K/V sharing, compressed attention): such state cannot be cut at an
  arbitrary prefix, so serving it from a prefix cache would be silently wrong.
- `self_check`: the logits of a short sequence computed in two pieces through `SequenceCache`
  must equal a single full forward; a family whose layers use the cache in some unforeseen way
  fails here at load time instead of producing wrong tokens later.
- `max_context`: the context window from the config (or tokenizer).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer, get_layer_types_and_kwargs

from hitrate.engine.api import UnsupportedArchitectureError
from hitrate.engine.kv_pool import KVShape
from hitrate.engine.seq_cache import SequenceCache

# Layer kinds whose K/V is per position and complete: a prefix of it is the prefix's K/V.
_ATTENTION_LAYER_TYPES = {"full_attention", "sliding_attention", "chunked_attention"}


@dataclass(frozen=True)
class KVLayout:
    shape: KVShape
    sliding: list[bool]  # layers with a sliding / chunked window (kept in full; the mask applies it)
    windows: list[int | None]
    layer_types: list[str]  # per layer: "full_attention", "sliding_attention", ...


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """fp32 on CPU (half precision matmuls are slow there); bf16 on GPUs that support it."""
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
             "half": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
    if dtype is not None and dtype != "auto":
        if dtype not in names:
            raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(names)}")
        return names[dtype]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def max_context(config, tokenizer) -> int:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 10_000_000:
        return limit
    raise UnsupportedArchitectureError(
        "the model's config states no context length (max_position_embeddings / n_positions)"
    )


def kv_layout(model) -> KVLayout:
    config = model.config
    try:
        layer_types, layer_kwargs = get_layer_types_and_kwargs(config)
    except Exception:  # configs without per-layer information: judged by the cache below
        layer_types, layer_kwargs = None, None
    if layer_types is not None:
        odd = sorted({t for t in layer_types if t not in _ATTENTION_LAYER_TYPES})
        if odd:
            raise UnsupportedArchitectureError(
                f"{config.model_type}: layers of type {', '.join(odd)} keep state that cannot be cut at an "
                "arbitrary prefix (recurrent, convolutional, shared or compressed K/V), so prefix caching "
                "would be wrong; this engine serves attention-only models"
            )
    probe = DynamicCache(config=config)
    bad = [type(layer).__name__ for layer in probe.layers if type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer)]
    if bad:
        raise UnsupportedArchitectureError(
            f"{config.model_type}: cache layers {sorted(set(bad))} are not plain attention K/V; prefix caching "
            "would be wrong for this model"
        )
    device = next(model.parameters()).device
    ids = _probe_ids(config, 2, device)
    with torch.no_grad():
        out = model(input_ids=ids, cache=probe, use_cache=True)
    cache = out.cache if getattr(out, "cache", None) is not None else probe
    shapes = {(tuple(layer.keys.shape), tuple(layer.values.shape)) for layer in cache.layers}
    if len(shapes) != 1:
        raise UnsupportedArchitectureError(
            f"{config.model_type}: layers differ in K/V shape ({sorted(shapes)}); not supported by the KV pool"
        )
    (kshape, vshape), = shapes
    if kshape != vshape or len(kshape) != 4 or kshape[2] != ids.shape[1]:
        raise UnsupportedArchitectureError(f"{config.model_type}: unexpected K/V shapes {kshape} / {vshape}")
    layers = len(cache.layers)
    if layer_types is None or len(layer_types) != layers:
        layer_types = ["full_attention"] * layers
        layer_kwargs = [{} for _ in range(layers)]
    windows = [kw.get("sliding_window") for kw in layer_kwargs]
    sliding = [t != "full_attention" for t in layer_types]
    dtype = cache.layers[0].keys.dtype
    return KVLayout(KVShape(layers, kshape[1], kshape[3], dtype), sliding, windows, list(layer_types))


def accepts_logits_to_keep(model) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def self_check(model, layout: KVLayout) -> float:
    """Max abs logit difference between a one-piece forward and a three-piece cached forward
    (the second piece mimics a cache hit, the third a decode step). Raises when they disagree."""
    config = model.config
    device = next(model.parameters()).device
    ids = _probe_ids(config, 12, device)
    shape = layout.shape
    cache = SequenceCache(
        layers=shape.layers,
        kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        capacity=8,  # smaller than the sequence: exercises in-place growth too
        dtype=shape.dtype,
        device=device,
        sliding=layout.sliding,
    )
    try:
        with torch.no_grad():
            full = model(input_ids=ids).logits.float()
            parts = [model(input_ids=ids[:, a:b], cache=cache, use_cache=True).logits.float() for a, b in ((0, 7), (7, 11), (11, 12))]
    except Exception as exc:
        raise UnsupportedArchitectureError(
            f"{config.model_type}: the model does not run on a pre-filled K/V cache ({type(exc).__name__}: {exc})"
        ) from exc
    diff = float((full - torch.cat(parts, dim=1)).abs().max())
    scale = float(full.abs().max()) or 1.0
    # fp32 splits agree to ~1e-6; half precision rounds differently per split, so only a gross
    # disagreement (state the cache does not carry) is caught there.
    tolerance = 1e-3 if shape.dtype == torch.float32 else 0.2
    if not diff <= tolerance * max(scale, 1.0):
        raise UnsupportedArchitectureError(
            f"{config.model_type}: logits from a cached prefix differ from a full recompute by {diff:.3g}; "
            "refusing to serve this model with prefix caching"
        )
    return diff


def _probe_ids(config, n: int, device: torch.device) -> torch.Tensor:
    vocab = int(getattr(config, "vocab_size", 0) or 0) or 1000
    return (torch.arange(n, device=device) * 7919 + 11).remainder(vocab).unsqueeze(0)


def batch_decode_check(model, layout: KVLayout) -> tuple[str | None, float, str]:
    """Can decode steps of sequences of different lengths run as one batch here? Runs three
    sequences of different lengths through row prefills and batched decode steps and compares
    each step's logits with a full forward. Returns (mask implementation or None, max abs diff,
    reason when batching is off). A model that fails is still served, one row at a time."""
    from hitrate.engine.batch_kv import BatchKV, batching_supported

    implementation = getattr(model.config, "_attn_implementation", None) or "eager"
    reason = batching_supported(implementation, layout.layer_types, layout.windows)
    if reason is not None:
        return None, 0.0, reason
    device = next(model.parameters()).device
    kv = BatchKV(layout.shape, rows=3, capacity=4, device=device, layer_types=layout.layer_types, windows=layout.windows)
    ids = _probe_ids(model.config, 24, device)[0].tolist()
    seqs = [ids[:13], ids[3:8], ids[1:22]]
    diff = scale = 0.0
    try:
        with torch.no_grad():
            kv.prefill_rows(model, seqs)
            for step in range(2):
                new = [(7 * step + 3 * row + 5) % max(2, model.config.vocab_size) for row in range(3)]
                kv.ensure_capacity(max(kv.lengths) + 1)
                cache = kv.decode_cache(3)
                mask = kv.decode_masks(cache.positions, implementation)
                out = model(input_ids=torch.tensor(new, device=device)[:, None], position_ids=cache.positions[:, None],
                            attention_mask=mask, cache=cache, use_cache=True).logits[:, -1].float()
                cache.commit([0, 1, 2])
                for row, seq in enumerate(seqs):
                    seq.append(new[row])
                    full = model(input_ids=torch.tensor([seq], device=device)).logits[0, -1].float()
                    diff = max(diff, float((full - out[row]).abs().max()))
                    scale = max(scale, float(full.abs().max()))
    except Exception as exc:
        return None, 0.0, f"batched decode failed ({type(exc).__name__}: {exc})"
    # As in `self_check`: fp32 agrees to ~1e-6; half precision rounds differently per batch shape.
    tolerance = (1e-3 if layout.shape.dtype == torch.float32 else 0.2) * max(scale, 1.0)
    if not diff <= tolerance:
        return None, diff, f"batched decode logits differ from a full forward by {diff:.3g}"
    return implementation, diff, ""
