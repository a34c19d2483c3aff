"""Decode steps computed straight from the model's weights, for the Llama and Gemma 3 layer shapes.

A decode step feeds one token per running row. On a CPU its matmuls are bound by how fast the
weights stream from memory (Gemma 3 270M in float32: ~1.07 GB per token, ~43 ms on two cores),
and everything else is overhead. transformers spends ~8 ms of it per step on that model: ~1,850
tensor ops and ~310 module calls (each RMSNorm alone is ten ops), a cache object per call, and
a flash-attention kernel tuned for long queries that costs ~80 us for a single query. This step
runs the same arithmetic in ~35 ops per layer:

- each RMSNorm in six ops (Gemma's `1 + weight` folded in once; a layer's query and key norms
  as one), used only when it reproduces the model's own norm modules bit for bit on a probe,
  else the module is called;
- q/k/v and gate/up as one matmul each (the weights are concatenated once; the model's own
  projections become views of the concatenated matrix, so no weight is stored twice);
- rotary embedding on q and k together, with the model's own `rotary_emb` for cos/sin;
- attention as two small matmuls and a softmax over exactly the keys a query may see (a sliding
  layer's window, each row's own length), K/V written in place into the `BatchKV` buffer.

Prefill chunks stay on transformers (their cost is in the matmuls). `build_fast_decoder` refuses a model whose
layers have another shape (its decode steps stay on transformers), and `check_fast_decoder` compares the
step's logits with a full forward on rows of different lengths before the engine uses it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from hitrate.engine import cpu_linear, huge_pages
from hitrate.engine.batch_kv import BatchKV, window_offset
from hitrate.engine.fast_norms import Norm, fused_qk_norm, norm
from hitrate.engine.quant import QuantLinear


class FastDecodeUnsupported(Exception):
    """The model's layers are not of a shape this step computes; the reason says which part."""


Product = Callable[[torch.Tensor], torch.Tensor]
# A layer's matrix products, in the order the per-row-count tables hold them.
_PRODUCTS = ("qkv", "o_proj", "gate_up", "down")


@dataclass
class _Layer:
    input_norm: Norm
    qkv: nn.Module
    q_norm: Norm | None
    k_norm: Norm | None
    qk_norm: Norm | None  # q_norm and k_norm as one norm over [n, heads + kv_heads, head_dim]
    o_proj: nn.Module
    post_attention_norm: Norm | None  # Gemma: after attention, before the residual add
    pre_mlp_norm: Norm
    post_mlp_norm: Norm | None  # Gemma: after the MLP, before the residual add
    gate_up: nn.Module
    act: Callable[[torch.Tensor], torch.Tensor]
    down: nn.Module
    scale: torch.Tensor  # the attention scaling as a 0-dim float32 tensor (see `_rms`)
    layer_type: str
    window: int | None


class FastDecoder:
    """Decode steps over a `BatchKV` (one new token per row). Build with `build_fast_decoder`."""

    def __init__(self, model, layers: list[_Layer], *, heads: int, kv_heads: int, head_dim: int,
                 rotary_by_type: bool, final_norm: Norm, softcap: float | None, packed_bytes: int) -> None:
        self.model = model
        self.layers = layers
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.group = heads // kv_heads
        self.rotary_by_type = rotary_by_type
        self.final_norm = final_norm
        self.softcap = softcap
        self.layer_types = sorted({layer.layer_type for layer in layers})
        self.check_diff = 0.0
        self.packed_bytes = packed_bytes  # of the concatenated projections' packed copies
        self.can_batch = True  # rows of different lengths share a step (see `decode_rows`)
        # rows -> (per layer (qkv, o_proj, gate_up, down), head) on weight copies chosen for
        # steps of that many rows (`engine.decode_tuning`)
        self._products: dict[int, tuple[list[tuple], Product]] = {}
        # The same for any other row count: the weights as stored, without module calls.
        self._plain = self._table(_plain_product)

    def move_weights_to_huge_pages(self) -> int:
        """Move the model's weights and the concatenated projections' (which the model's own
        projections are views of) to huge pages (`engine.huge_pages`); returns the bytes moved.
        The plain products hold views of the old storages: they are let go first, so that each
        old storage is freed as soon as it is copied, and taken again on the moved weights. Call
        before `engine.decode_tuning`, whose tables hold plain products for the matrices they do not copy."""
        own = [p for layer in self.layers for m in (layer.qkv, layer.gate_up) for p in m.parameters()]
        self._plain = ([], None)
        moved = huge_pages.move_to_huge_pages([*self.model.parameters(), *own])
        self.take_plain_products()
        return moved

    def take_plain_products(self) -> None:
        """Take the products on the weights as stored from the model's modules as they are now
        (after they moved, or a module was swapped for another)."""
        self._plain = self._table(_plain_product)

    def _table(self, product: Callable[[nn.Module], Product]) -> tuple[list[tuple], Product]:
        """(per layer, its `_PRODUCTS` as `product(module)`; the head's)."""
        return ([tuple(product(getattr(layer, name)) for name in _PRODUCTS) for layer in self.layers],
                product(self.model.lm_head))

    @property
    def batch_pack_sizes(self) -> tuple[int, ...]:
        """Row counts whose steps run on weight copies of their own, most rows first."""
        return tuple(sorted(self._products, reverse=True))

    def product_modules(self) -> list[nn.Module]:
        """The modules whose products a step runs: each layer's `_PRODUCTS`, then the head."""
        return [getattr(layer, name) for layer in self.layers for name in _PRODUCTS] + [self.model.lm_head]

    def table_from(self, products: dict[int, Product]) -> tuple[list[tuple], Product]:
        """A step's products with `products[id(module)]` in place of each module it names
        (weight copies, `engine.decode_tuning`), the weights as stored for the others."""
        return self._table(lambda m: products.get(id(m)) or _plain_product(m))

    def use_table(self, rows: int, table: tuple[list[tuple], Product] | None) -> None:
        """Steps of exactly `rows` rows run on `table` (None: on the weights as stored)."""
        if table is None:
            self._products.pop(rows, None)
        else:
            self._products[rows] = table

    # ------------------------------------------------------------------ steps

    @torch.inference_mode()
    def decode_row(self, kv: BatchKV, row: int, token: int) -> torch.Tensor:
        """Logits `[1, vocab]` of `token` fed at row `row`'s next position; the row's K/V gains
        that position (the caller commits the length)."""
        p = kv.lengths[row]
        views = kv.layer_views()
        positions = torch.tensor([p], device=kv.device)

        def attend(i: int, layer: _Layer, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            keys, values = views[i][0][row], views[i][1][row]  # [kv_heads, capacity, head_dim]
            keys[:, p] = k[0]
            values[:, p] = v[0]
            # Exactly the keys this query sees: a sliding layer's last `window` positions.
            start = window_offset(p, layer.window) if layer.layer_type == "sliding_attention" else 0
            return self._attention(q.view(self.kv_heads, self.group, self.head_dim), keys[:, start: p + 1],
                                   values[:, start: p + 1], None, layer)

        return self._forward(torch.tensor([token], device=kv.device), positions, attend)

    @torch.inference_mode()
    def decode_rows(self, kv: BatchKV, tokens: list[int]) -> torch.Tensor:
        """Logits `[n, vocab]` of one step over rows [0, n) (`tokens[r]` fed at row r's next
        position; rows that are padding compute too and are never committed)."""
        n = len(tokens)
        views = kv.layer_views()
        lengths = kv.lengths[:n]
        positions = torch.tensor(lengths, device=kv.device)
        low, kv_len = min(lengths), max(lengths) + 1
        masks = kv.decode_masks(positions, "eager")  # additive: 0 where a row may attend
        rows = torch.arange(n, device=kv.device)
        aligned = low == kv_len - 1  # every row at the same position (requests started together)

        def attend(i: int, layer: _Layer, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            keys, values = views[i][0][:n], views[i][1][:n]  # [n, kv_heads, capacity, head_dim]
            if aligned:  # one strided copy instead of an indexed write (a third of its cost)
                keys[:, :, low] = k
                values[:, :, low] = v
            else:
                keys[rows, :, positions] = k
                values[rows, :, positions] = v
            # The keys (and mask) `BatchKV.decode_masks` prepared for this layer type.
            start = window_offset(low, kv.slice_windows.get(layer.layer_type))
            mask = masks if isinstance(masks, torch.Tensor) else masks[layer.layer_type]
            keys = keys[:, :, start:kv_len]
            values = values[:, :, start:kv_len]
            q = q.view(n, self.kv_heads, self.group, self.head_dim)
            return self._attention(q, keys, values, mask, layer)

        return self._forward(torch.tensor(tokens, device=kv.device), positions, attend)

    def _forward(self, tokens: torch.Tensor, positions: torch.Tensor, attend) -> torch.Tensor:
        n = tokens.shape[0]
        inner = self.model.model
        h = inner.embed_tokens(tokens[:, None])[:, 0]  # the module: Gemma scales its embedding
        rotary = self._rotary(h, positions)
        nq, nkv, hd = self.heads, self.kv_heads, self.head_dim
        half = hd // 2
        products, head = self._products.get(n) or self._plain
        for i, layer in enumerate(self.layers):
            qkv, o_proj, gate_up, down = products[i]
            x = layer.input_norm(h)
            heads = qkv(x).view(n, nq + 2 * nkv, hd)
            qk, v = heads[:, : nq + nkv], heads[:, nq + nkv:]
            if layer.qk_norm is not None:
                qk = layer.qk_norm(qk)
            elif layer.q_norm is not None or layer.k_norm is not None:
                q, k = qk.split((nq, nkv), dim=1)
                q = q if layer.q_norm is None else layer.q_norm(q)
                k = k if layer.k_norm is None else layer.k_norm(k)
                qk = torch.cat((q, k), dim=1)
            # Rotary embedding: `rotate_half(x)` is `roll(x, half)` with the first half negated,
            # which `_rotary` folded into sin (the same products, bit for bit).
            cos, sin = rotary[layer.layer_type]
            qk = qk * cos + qk.roll(half, -1) * sin
            attn = attend(i, layer, qk[:, :nq], qk[:, nq:], v).reshape(n, nq * hd)
            attn = o_proj(attn)
            if layer.post_attention_norm is not None:
                attn = layer.post_attention_norm(attn)
            h = h + attn
            x = layer.pre_mlp_norm(h)
            gate, up = gate_up(x).chunk(2, dim=-1)
            x = down(layer.act(gate) * up)
            if layer.post_mlp_norm is not None:
                x = layer.post_mlp_norm(x)
            h = h + x
        logits = head(self.final_norm(h))
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def _rotary(self, h: torch.Tensor, positions: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """cos and sin `[n, 1, head_dim]` by layer type, from the model's own rotary module, sin
        with its first half negated (see `_forward`)."""
        emb = self.model.model.rotary_emb
        ids = positions[:, None]
        if self.rotary_by_type:
            pairs = {t: emb(h[:, None], ids, t) for t in self.layer_types}
        else:
            pairs = dict.fromkeys(self.layer_types, emb(h[:, None], ids))
        half = self.head_dim // 2
        return {t: (cos.to(h.dtype), torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).to(h.dtype))
                for t, (cos, sin) in pairs.items()}

    def _attention(self, q, keys, values, mask, layer: _Layer) -> torch.Tensor:
        """`q` [..., kv_heads, group, d] against `keys` / `values` [..., kv_heads, T, d], as the
        `bmm`s that `torch.matmul` would run on them (the same products) without its broadcasting
        wrapper; `mask` [n, 1, 1, T] for rows `[n, kv_heads, ...]`."""
        shape = q.shape
        q3, keys3, values3 = q.reshape(-1, *shape[-2:]), keys.flatten(0, -3), values.flatten(0, -3)
        scores = torch.bmm(q3, keys3.transpose(1, 2)).mul_(layer.scale)
        if mask is not None:
            scores = (scores.view(*shape[:-1], -1) + mask).flatten(0, -3)  # broadcasts over heads and the group
        if scores.dtype != torch.float32:  # as transformers' eager attention: softmax in float32
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        else:
            weights = torch.softmax(scores, dim=-1)
        return torch.bmm(weights, values3)


# ---------------------------------------------------------------------- building


def build_fast_decoder(model, layer_types: list[str], windows: list[int | None]) -> FastDecoder:
    """The fast step for `model`, or `FastDecodeUnsupported` with the reason."""
    inner = getattr(model, "model", None)
    for name in ("embed_tokens", "layers", "norm", "rotary_emb"):
        if inner is None or not hasattr(inner, name):
            raise FastDecodeUnsupported(f"the model has no `model.{name}`")
    if not isinstance(getattr(model, "lm_head", None), nn.Module):
        raise FastDecodeUnsupported("the model has no `lm_head`")
    config = model.config
    if getattr(config, "attn_logit_softcapping", None):
        raise FastDecodeUnsupported("attention logit soft-capping")
    params = inspect.signature(inner.rotary_emb.forward).parameters
    rotary_by_type = "layer_type" in params
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    first = inner.layers[0].self_attn
    head_dim = int(getattr(first, "head_dim", 0) or config.hidden_size // heads)
    layers = [
        _layer(layer, i, layer_types[i], windows[i], heads, kv_heads, head_dim)
        for i, layer in enumerate(inner.layers)
    ]
    packed = _pack_concatenated(layers) if next(model.parameters()).dtype == torch.bfloat16 else 0
    return FastDecoder(
        model, layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, rotary_by_type=rotary_by_type,
        final_norm=norm(inner.norm), softcap=getattr(config, "final_logit_softcapping", None), packed_bytes=packed,
    )


def _pack_concatenated(layers: list[_Layer]) -> int:
    """A bfloat16 model's linears run on oneDNN's packed weights (`cpu_linear.pack_all_linears`);
    so do the concatenated projections. Returns the bytes of their packed copies."""
    held = nn.ModuleList(m for layer in layers for m in (layer.qkv, layer.gate_up))
    extra = cpu_linear.pack_all_linears(held)
    for layer, qkv, gate_up in zip(layers, held[0::2], held[1::2]):
        layer.qkv, layer.gate_up = qkv, gate_up
    return extra


def _layer(layer: nn.Module, index: int, layer_type: str, window: int | None, heads: int, kv_heads: int,
           head_dim: int) -> _Layer:
    attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    need = {
        "self_attn": attn, "mlp": mlp,
        "input_layernorm": getattr(layer, "input_layernorm", None),
        "post_attention_layernorm": getattr(layer, "post_attention_layernorm", None),
        "self_attn.o_proj": getattr(attn, "o_proj", None),
        "mlp.down_proj": getattr(mlp, "down_proj", None),
    }
    # Phi-3 ships q/k/v and gate/up already concatenated (`qkv_proj`, `gate_up_proj`).
    if not hasattr(attn, "qkv_proj"):
        for name in ("q_proj", "k_proj", "v_proj"):
            need[f"self_attn.{name}"] = getattr(attn, name, None)
    if not hasattr(mlp, "gate_up_proj"):
        for name in ("gate_proj", "up_proj"):
            need[f"mlp.{name}"] = getattr(mlp, name, None)
    act = getattr(mlp, "act_fn", None) or getattr(mlp, "activation_fn", None)
    need["mlp.act_fn"] = act
    missing = [name for name, part in need.items() if part is None]
    if missing:
        raise FastDecodeUnsupported(f"layer {index} has no {', '.join(missing)}")
    if getattr(attn, "sliding_window", None) not in (None, window):
        raise FastDecodeUnsupported(f"layer {index}: its sliding window differs from the cache layout's")
    if hasattr(attn, "qkv_proj"):
        qkv = attn.qkv_proj
        if qkv.out_features != (heads + 2 * kv_heads) * head_dim:
            raise FastDecodeUnsupported(f"layer {index}: qkv_proj size does not match the head counts")
    else:
        if attn.q_proj.out_features != heads * head_dim or attn.k_proj.out_features != kv_heads * head_dim:
            raise FastDecodeUnsupported(f"layer {index}: projection sizes do not match the head counts")
        qkv = _concatenated([attn.q_proj, attn.k_proj, attn.v_proj], index)
    if hasattr(mlp, "gate_up_proj"):
        gate_up = mlp.gate_up_proj
    else:
        gate_up = _concatenated([mlp.gate_proj, mlp.up_proj], index)
    # Gemma 3 normalizes around both blocks ("sandwich"); Llama's `post_attention_layernorm` is
    # the norm *before* its MLP.
    sandwich = hasattr(layer, "pre_feedforward_layernorm")
    if sandwich and not hasattr(layer, "post_feedforward_layernorm"):
        raise FastDecodeUnsupported(f"layer {index} has pre- but no post-feedforward norm")
    q_norm = norm(attn.q_norm) if getattr(attn, "q_norm", None) is not None else None
    k_norm = norm(attn.k_norm) if getattr(attn, "k_norm", None) is not None else None
    both = q_norm is not None and k_norm is not None
    return _Layer(
        input_norm=norm(layer.input_layernorm),
        qkv=qkv,
        q_norm=q_norm,
        k_norm=k_norm,
        qk_norm=fused_qk_norm(attn, q_norm, k_norm, heads, kv_heads) if both else None,
        o_proj=attn.o_proj,
        post_attention_norm=norm(layer.post_attention_layernorm) if sandwich else None,
        pre_mlp_norm=norm(layer.pre_feedforward_layernorm if sandwich else layer.post_attention_layernorm),
        post_mlp_norm=norm(layer.post_feedforward_layernorm) if sandwich else None,
        gate_up=gate_up,
        act=act,
        down=mlp.down_proj,
        scale=torch.tensor(float(getattr(attn, "scaling", head_dim ** -0.5)), dtype=torch.float32),
        layer_type=layer_type,
        window=window,
    )


class SideBySide(nn.Module):
    """Projections kept in GGUF blocks (`engine.quant.QuantLinear`), computed one after another
    and concatenated: their blocks cannot be joined without a copy, and each product already
    runs on the quantized kernel."""

    def __init__(self, linears: list[nn.Module]) -> None:
        super().__init__()
        self.parts = nn.ModuleList(linears)
        self.in_features = linears[0].in_features
        self.out_features = sum(lin.out_features for lin in linears)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([part(x) for part in self.parts], dim=-1)


def _concatenated(linears: list[nn.Module], index: int) -> nn.Linear:
    """One linear computing `linears` side by side. The originals' weights become views of its
    weight (same values, no second copy); their packed copies, if any, stay for prefill."""
    if all(isinstance(lin, QuantLinear) for lin in linears):
        return SideBySide(linears)
    if any(not isinstance(lin, nn.Linear) for lin in linears):
        raise FastDecodeUnsupported(f"layer {index}: a projection is not a linear layer")
    biases = [lin.bias for lin in linears]
    if any(b is None for b in biases) and not all(b is None for b in biases):
        raise FastDecodeUnsupported(f"layer {index}: some projections have a bias and some not")
    # Weights kept `[in, out]` in memory (`cpu_linear.store_transposed`) are concatenated in that
    # layout, so the fused matmul takes the same fast path.
    transposed = all(lin.weight.t().is_contiguous() and not lin.weight.is_contiguous() for lin in linears)
    with torch.no_grad():
        if transposed:
            weight = torch.cat([lin.weight.detach().t() for lin in linears], dim=1).t()
        else:
            weight = torch.cat([lin.weight.detach() for lin in linears])
        bias = None if biases[0] is None else torch.cat([b.detach() for b in biases])
        out = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device="meta")
        out.weight = nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            out.bias = nn.Parameter(bias, requires_grad=False)
        start = 0
        for lin in linears:
            end = start + lin.out_features
            lin.weight = nn.Parameter(weight[start:end], requires_grad=False)
            if bias is not None:
                lin.bias = nn.Parameter(bias[start:end], requires_grad=False)
            start = end
    return out


def _plain_product(module: nn.Module) -> Product:
    """`x -> module(x)` for a 2-D `x`: for a plain linear its weight as stored, without the module
    call (`cpu_linear.weight_product`); any other module (a packed copy, a quantized linear) is
    called as is."""
    if type(module) is not nn.Linear:
        return module
    return cpu_linear.weight_product(module.weight, module.bias)


def check_fast_decoder(decoder: FastDecoder, model, layout) -> float:
    """Max abs logit difference between `decoder`'s steps and a full forward of the same tokens:
    one row alone (not row 0), then rows of different lengths together; raises
    `FastDecodeUnsupported` when they disagree."""
    device = next(model.parameters()).device
    shape = layout.shape
    kv = BatchKV(shape, rows=3, capacity=4, device=device, layer_types=layout.layer_types, windows=layout.windows)
    vocab = int(model.config.vocab_size)
    ids = [(i * 7919 + 11) % vocab for i in range(24)]
    fed = [ids[:12], ids[3:7], ids[1:21]]
    pending = [ids[12], ids[7], ids[21]]
    diff = scale = 0.0

    def took(row: int, token: int, logits: torch.Tensor) -> None:
        nonlocal diff, scale
        fed[row].append(token)
        kv.lengths[row] += 1
        full = model(input_ids=torch.tensor([fed[row]], device=device)).logits[0, -1].float()
        diff = max(diff, float((full - logits.float()).abs().max()))
        scale = max(scale, float(full.abs().max()))
        pending[row] = (7 * len(fed[row]) + 3 * row + 5) % vocab

    try:
        with torch.inference_mode():
            kv.prefill_rows(model, fed)
            kv.ensure_capacity(kv.lengths[1] + 1)
            took(1, pending[1], decoder.decode_row(kv, 1, pending[1])[0])
            for _ in range(2):
                kv.ensure_capacity(max(kv.lengths) + 1)
                tokens = list(pending)
                logits = decoder.decode_rows(kv, tokens)
                for row, token in enumerate(tokens):
                    took(row, token, logits[row])
    except Exception as exc:
        raise FastDecodeUnsupported(f"the fast decode step failed ({type(exc).__name__}: {exc})") from exc
    # As the engine's other checks: float32 agrees to ~1e-6; bfloat16 rounds differently per shape.
    tolerance = (1e-3 if shape.dtype == torch.float32 else 0.2) * max(scale, 1.0)
    if not diff <= tolerance:
        raise FastDecodeUnsupported(f"its logits differ from a full forward by {diff:.3g}")
    decoder.check_diff = diff
    return diff
