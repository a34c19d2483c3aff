"""`hitrate engine verify MODEL`: what the prefix cache does on this model, measured.

For a prompt and a variant edited in the middle (so only the part before the edit can be served
from the cache), it reports:
- the largest logit difference between the cache-served variant and a full recompute without any
  cache object (exactness);
- K/V groups: how many query heads share each K/V head (grouped-query attention);
- the QK products (query-key dot products, summed over layers and query heads) the cache saved on
  the variant, out of what a full recompute computes; sliding-window layers only score keys
  inside their window;
- K/V bytes per token: every layer at every position, what the engine's pool holds per cached
  token after these two requests (sliding-window layers keep only the window of each cached
  end), and the theoretical minimum at the prompt's length and at the model's context window,
  where a sliding-window layer needs no more than its window;
- with a float32 `reference` engine of the same model (for a model loaded in another dtype, or a
  GGUF file kept quantized as shipped, whose reference is its blocks dequantized to float32: the
  same weights, only the products' summation order differs): the largest logit difference from
  float32 over the prompt, and how often the top token agrees;
- the bytes the weights take in memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from hitrate.engine import cpu_threads, decode_tuning, native_gemv
from hitrate.engine.gguf_load.model import quantized, weight_nbytes
from hitrate.engine.runner import TransformersEngine

DEFAULT_PROMPT = (
    "You are a careful assistant working in a software repository. Read the task, plan the change, "
    "edit the files, run the tests and report what changed. The repository holds a parser, a cache "
    "layer, a command-line interface and a test suite of several hundred cases. Keep every edit small "
    "and explain each one. The user asks: the cache layer drops entries too early under load; find the "
    "cause, fix it, and add a test that fails before the fix and passes after it."
)


@dataclass
class VerifyReport:
    model: str
    dtype: str  # of the K/V cache and the activations
    prompt_tokens: int
    variant_tokens: int
    cached_tokens: int  # of the variant, served from the cache
    max_logit_diff: float  # cache-served variant vs full recompute
    query_heads: int
    kv_heads: int
    kv_groups: int  # query heads per K/V head
    layers: int
    sliding_layers: int
    sliding_window: int | None
    qk_products_full: int  # a full recompute of the variant
    qk_products_computed: int  # with the cache
    kv_bytes_per_token_accounted: int  # every layer, every position (what a row of the batch buffer stores)
    kv_bytes_per_cached_token: int  # what the pool holds per cached token after the run
    kv_bytes_per_token_at_prompt: float  # theoretical, averaged over the prompt's length
    kv_bytes_per_token_at_context: float  # theoretical, averaged over the full context window
    context_window: int
    fast_decode: bool = False  # decode steps straight from the weights (`engine.fast_decode`)
    fast_decode_check_diff: float | None = None  # its logits vs a full forward, checked at load
    fast_decode_off_reason: str = ""
    # per row count of a decode step: {"rows", "layout" chosen, "step_ms" of every layout timed}
    # (`engine.decode_tuning`); empty when nothing but the weights as stored could run
    step_layouts: list[dict] = field(default_factory=list)
    # how they were chosen: timed, cached, not tuned, or kept at the default on a loaded machine
    step_layouts_note: str = ""
    threads: str = ""  # the CPU threads of the engine's work, and why (`engine.cpu_threads`)
    packed_weight_bytes: int = 0  # what every packed copy adds to the model's own weights
    gemv_kernel_off_reason: str | None = None  # why `engine.native_gemv` was not among the layouts timed
    huge_page_weight_bytes: int = 0  # weights on transparent huge pages (`engine.huge_pages`)
    float32_max_logit_diff: float | None = None  # this dtype vs a float32 copy of the model, on the prompt
    float32_top_token_agreement: float | None = None  # share of prompt positions with the same argmax
    float32_logit_span: float | None = None  # largest |logit| of the float32 copy, for scale
    weights: str = ""  # "gguf" for quantized matrices kept as shipped, else the weights' dtype
    weight_bytes: int = 0  # the weights as they sit in memory

    @property
    def qk_saved_fraction(self) -> float:
        return 1 - self.qk_products_computed / self.qk_products_full if self.qk_products_full else 0.0

    @property
    def _weights_label(self) -> str:
        return "quantized as shipped (gguf), activations float32" if self.weights == "gguf" else self.dtype

    @property
    def _reference_label(self) -> str:
        if self.weights == "gguf":
            return "quantized kernels vs the same weights dequantized to float32"
        return f"{self.dtype} vs float32"

    def as_dict(self) -> dict:
        return {**asdict(self), "qk_saved_fraction": self.qk_saved_fraction}

    def lines(self) -> list[str]:
        window = f", window {self.sliding_window}" if self.sliding_layers else ""
        return [
            f"model {self.model} ({self._weights_label}), {self.layers} layers ({self.sliding_layers} sliding{window}); "
            f"weights in memory {self.weight_bytes / 2**20:,.1f} MiB",
            f"prompt {self.prompt_tokens} tokens; variant edited in the middle: {self.variant_tokens} tokens, "
            f"{self.cached_tokens} served from the cache",
            f"cached vs recompute: max |logit diff| = {self.max_logit_diff:.3g}",
            f"K/V groups: {self.query_heads} query heads over {self.kv_heads} K/V heads "
            f"({self.kv_groups} query heads share each K/V head)",
            f"QK products on the variant: {self.qk_products_computed:,} computed of {self.qk_products_full:,} "
            f"for a full recompute ({self.qk_saved_fraction:.1%} saved by the cache)",
            f"K/V bytes per token: {self.kv_bytes_per_token_accounted:,} for every layer; the pool holds "
            f"{self.kv_bytes_per_cached_token:,} per cached token (sliding-window pages released); "
            f"theoretical {self.kv_bytes_per_token_at_prompt:,.0f} at {self.prompt_tokens} tokens, "
            f"{self.kv_bytes_per_token_at_context:,.0f} at the {self.context_window:,}-token context",
            (f"decode steps: straight from the weights, checked at load against a full forward "
             f"(max |logit diff| = {self.fast_decode_check_diff:.3g})" if self.fast_decode
             else f"decode steps: through the model's forward ({self.fast_decode_off_reason})"),
            (f"weights on huge pages: {self.huge_page_weight_bytes / 2**20:,.1f} MiB" if self.huge_page_weight_bytes
             else "weights on huge pages: none (the system has none, or the weights are not in CPU memory)"),
        ] + ([] if not self.step_layouts else [
            f"decode step layouts timed at load, the fastest chosen (or within "
            f"{decode_tuning.NEAR_FASTEST - 1:.0%} the one most row counts run on; "
            f"{self.packed_weight_bytes / 2**20:,.0f} MiB "
            f"of weight copies in all; ms per step):",
            *(f"  {entry['rows']} row{'s' if entry['rows'] > 1 else ' '} {entry['layout']:<14} "
              + ", ".join(f"{name} {ms:.2f}" for name, ms in entry["step_ms"].items()) for entry in self.step_layouts),
            f"  ({self.step_layouts_note})",
        ]) + ([] if not self.threads else [f"threads: {self.threads}"]) + ([] if self.gemv_kernel_off_reason is None else [
            f"the engine's GEMV kernel was not timed: {self.gemv_kernel_off_reason}",
        ]) + ([] if self.float32_max_logit_diff is None else [
            f"{self._reference_label} on the prompt: max |logit diff| = {self.float32_max_logit_diff:.3g} "
            f"(logits span {self.float32_logit_span:.3g}); top token agrees at {self.float32_top_token_agreement:.1%} "
            f"of positions",
        ])


def edited_variant(ids: list[int], replacement: list[int]) -> list[int]:
    """`ids` with its middle token replaced (a different token, so the prefixes split there)."""
    middle = len(ids) // 2
    return ids[:middle] + replacement + ids[middle + 1 :]


def _qk_products(n: int, start: int, windows: list[int | None], heads: int) -> int:
    """Query-key products for queries at positions [start, n) over every layer and query head."""
    total = 0
    for window in windows:
        for i in range(start, n):
            total += min(i + 1, window) if window else i + 1
    return total * heads


def _theoretical_bytes(n: int, windows: list[int | None], per_layer: int) -> float:
    return sum(min(n, w) if w else n for w in windows) * per_layer / n


def verify(engine: TransformersEngine, prompt: str = DEFAULT_PROMPT,
           reference: TransformersEngine | None = None) -> VerifyReport:
    """`reference`: a float32 engine of the same model, to compare this engine's dtype against."""
    tokenizer = engine.tokenizer
    ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    if len(ids) < 8:
        raise ValueError("the prompt must have at least 8 tokens")
    middle = ids[len(ids) // 2]
    other = next(t for t in tokenizer(" different", add_special_tokens=False)["input_ids"] + [middle + 1, 0]
                 if t != middle)
    variant = edited_variant(ids, [other])
    salt = "hitrate-verify"
    engine.prefill_logits(ids, salt)  # cold: fills the cache
    logits, cached = engine.prefill_logits(variant, salt)
    with torch.inference_mode():
        full = engine.model(input_ids=torch.tensor([variant], device=engine.device)).logits[0].float()
    diff = float((logits - full[cached:]).abs().max())
    against = against_float32(engine, reference, ids) if reference is not None else {}

    config = engine.model.config
    shape = engine.layout.shape
    query_heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0) or shape.kv_heads)
    windows = [w if s else None for s, w in zip(engine.layout.sliding, engine.layout.windows)]
    per_layer = 2 * shape.kv_heads * shape.head_dim * torch.empty((), dtype=shape.dtype).element_size()
    sliding = [w for w in windows if w]
    return VerifyReport(
        model=engine.model_name,
        dtype=str(shape.dtype).removeprefix("torch."),
        weights="gguf" if quantized(engine.model) else str(next(engine.model.parameters()).dtype).removeprefix("torch."),
        weight_bytes=weight_nbytes(engine.model),
        prompt_tokens=len(ids),
        variant_tokens=len(variant),
        cached_tokens=cached,
        max_logit_diff=diff,
        query_heads=query_heads,
        kv_heads=shape.kv_heads,
        kv_groups=max(1, query_heads // shape.kv_heads),
        layers=shape.layers,
        sliding_layers=len(sliding),
        sliding_window=min(sliding) if sliding else None,
        qk_products_full=_qk_products(len(variant), 0, windows, query_heads),
        qk_products_computed=_qk_products(len(variant), cached, windows, query_heads),
        kv_bytes_per_token_accounted=shape.bytes_per_token,
        kv_bytes_per_cached_token=engine.kv_bytes_per_cached_token(),
        kv_bytes_per_token_at_prompt=_theoretical_bytes(len(ids), windows, per_layer),
        kv_bytes_per_token_at_context=_theoretical_bytes(engine.max_context, windows, per_layer),
        context_window=engine.max_context,
        fast_decode=engine.fast_decoder is not None,
        fast_decode_check_diff=engine.fast_decoder.check_diff if engine.fast_decoder is not None else None,
        fast_decode_off_reason=engine.fast_decode_off_reason,
        step_layouts=[{"rows": rows, "layout": layout, "step_ms": engine.step_layouts.step_ms.get(rows, {}),
                       "noisy": rows in engine.step_layouts.noisy or engine.step_layouts.loaded}
                      for rows, layout in sorted(engine.step_layouts.chosen.items())],
        step_layouts_note=engine.step_layouts.note(),
        threads=cpu_threads.policy().describe(),
        packed_weight_bytes=engine.packed_weight_bytes,
        gemv_kernel_off_reason=_gemv_kernel_off_reason(engine),
        huge_page_weight_bytes=engine.huge_page_bytes,
        **against,
    )


def _gemv_kernel_off_reason(engine: TransformersEngine) -> str | None:
    """Where layouts were timed without the engine's own kernel: why it could not be built."""
    timed = engine.step_layouts.step_ms
    if not timed or any(decode_tuning.GEMV_KERNEL in times for times in timed.values()):
        return None
    dtype = next(engine.model.parameters()).dtype
    return native_gemv.unavailable_reason(dtype) or "its copies did not fit the copy budget (--copy-budget) or disagreed with the weights"


def against_float32(engine: TransformersEngine, reference: TransformersEngine, ids: list[int]) -> dict:
    """`engine`'s logits on `ids` (no cache) against those of `reference`, a float32 engine of the
    same model: the largest difference, the share of positions whose top token agrees, and the
    largest float32 logit (for scale)."""
    with torch.inference_mode():
        ours = engine.model(input_ids=torch.tensor([ids], device=engine.device)).logits[0].float()
        theirs = reference.model(input_ids=torch.tensor([ids], device=reference.device)).logits[0].float()
    theirs = theirs.to(ours.device)
    return {
        "float32_max_logit_diff": float((ours - theirs).abs().max()),
        "float32_top_token_agreement": float((ours.argmax(-1) == theirs.argmax(-1)).float().mean()),
        "float32_logit_span": float(theirs.abs().max()),
    }
