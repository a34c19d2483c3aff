"""`TransformersEngine`: any transformers causal LM behind the `Engine` protocol, with an exact
cross-request prefix cache and continuous batching.

Requests run concurrently through `scheduler.Scheduler` (one worker thread; see there for the
step). Per request:
1. `radix.begin` matches the prompt's longest cached prefix (at most len - 1 tokens: the last
   prompt token is always recomputed, it produces the first logits) and locks it. The stream
   yields `PrefillStarted` with that split right away, before any compute.
2. The request's row of the batch buffer is filled for positions [0, matched): kept in place
   where a previous request left the same tokens there, the rest copied from the KV pool.
3. Only prompt[matched:] goes through the model, in chunks interleaved with the other requests'
   decode steps; then every decoding request advances by one token per batched forward.
4. `radix.finish` stores the K/V of every token the model consumed (prompt + generated, minus the
   last sampled token, which was never fed) into pool pages, so the next turn of a conversation
   hits the reply too, unlocks, and pins each of the request's `pins` for its own TTL.

Models with sliding-window layers keep those layers' pool K/V only within the window of each
cached end (`radix_window`): what a cached token costs drops towards the full-attention layers'
share as prefixes grow past the window (Gemma 3 270M: 3 of 18 layers).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterator

import torch

from hitrate.engine import cpu_linear, cpu_threads, decode_tuning, huge_pages, loading, modelinfo
from hitrate.engine.api import (
    ContextLengthError,
    EngineError,
    GenerationRequest,
    GenerationResult,
    PrefillStarted,
    SamplingParams,
    StreamItem,
)
from hitrate.engine.batch_kv import BatchKV, sliding_slice_windows
from hitrate.engine.compute_thread import off_main_thread
from hitrate.engine.constraints import Constraint, TokenizerIndex
from hitrate.engine.fast_decode import FastDecoder, FastDecodeUnsupported, build_fast_decoder, check_fast_decoder
from hitrate.engine.kv_pool import KVPool
from hitrate.engine.load_progress import LoadProgress
from hitrate.engine.model_forward import ModelForward
from hitrate.engine.radix import RadixCache
from hitrate.engine.sampling import validate_params
from hitrate.engine.scheduler import Scheduler
from hitrate.engine.sequence import PrefillLogits, make_sequence
from hitrate.engine.tuning_cache import TuningCache

# Before the process's first tensor (none of the imports above allocates one): PyTorch's own
# large CPU blocks, the packed weight copies among them, on huge pages (`engine.huge_pages`).
huge_pages.enable_for_torch_allocations()

_CPU_POOL_BYTES = 1 << 30  # default pool budget on CPU
_GPU_POOL_FRACTION = 0.4  # of the memory left free after loading the model
_MAX_AUTO_POOL_TOKENS = 1 << 20
_INITIAL_ROW_CAPACITY = 256  # positions per batch row before the first growth
# Auto-sized pools of sliding-window models: window pages for this share of the cached tokens
# (each cached end needs only its last `window` positions of the sliding layers).
_WINDOW_SHARE = 4


class TransformersEngine:
    """Implements `hitrate.engine.api.Engine`."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        model_name: str,
        pool_tokens: int | None = None,
        page_size: int = 1,
        host_tier_tokens: int = 0,
        prefill_chunk: int = 4096,
        max_batch: int = 8,
        interleave_chunk: int = 256,
        window_pool_tokens: int | None = None,
        pack_min_bytes: int | None = cpu_linear.DEFAULT_MIN_PACK_BYTES,
        fast_decode: bool = True,
        batch_pack_bytes: int = cpu_linear.DEFAULT_BATCH_PACK_BYTES,
        tune: bool = True,
        progress: LoadProgress | None = None,
    ) -> None:
        """`max_batch`: requests running at once (each holds one row of the batch buffer; more wait).
        `interleave_chunk`: prefill chunk while other requests are decoding.
        `window_pool_tokens`: for models with sliding-window layers, how many cached positions may
        hold those layers' K/V (default: `pool_tokens` when that is given, else a share of the
        automatic budget); 0 keeps every layer for every cached token.
        `pack_min_bytes`: on the CPU, float32 weight matrices at least this large get a oneDNN
        copy for batched decode steps, and a bfloat16 model runs every linear on oneDNN
        (`engine.cpu_linear`); None leaves the model's linears as they are.
        `fast_decode`: run decode steps straight from the weights (`engine.fast_decode`) when the
        model's layers have a shape it knows and its logits pass the check against a full
        forward; False keeps every step on the model's forward.
        `batch_pack_bytes`: float32 on the CPU, with the fast step: at most this many bytes of
        weight copies in other layouts (oneDNN's, row-major, MKL-packed), which the load times
        against the weights as stored at each row count up to `max_batch`, keeping the fastest
        (`engine.decode_tuning`; each copy costs the weights' bytes once more); 0 for none.
        `tune`: False runs every row count on the default layout without timing (`--no-tune`);
        a timed choice is cached on disk (`engine.tuning_cache`) and read by the next start.
        `progress`: where the load stages are reported (`engine.load_progress`)."""
        if page_size < 1 or prefill_chunk < 1 or max_batch < 1 or interleave_chunk < 1:
            raise ValueError("page_size, prefill_chunk, max_batch and interleave_chunk must be >= 1")
        self.model = model.eval()
        self.progress = progress or LoadProgress()
        self._tune = tune
        with self.progress.timed("pack", detail="oneDNN copies for the model's forward") as info:
            self.packed_weight_bytes = self._pack_weights(pack_min_bytes, max_batch)
            info["nbytes"] = self.packed_weight_bytes
        self._tokenizer = tokenizer
        self.model_name = model_name
        self.device = next(model.parameters()).device
        self.layout = modelinfo.kv_layout(model)
        with self.progress.timed("check", detail="cached vs recomputed logits"):
            self.self_check_diff = modelinfo.self_check(model, self.layout)
        self.max_context = modelinfo.max_context(model.config, tokenizer)
        self.vocab_size = int(model.config.vocab_size)
        self._logits_to_keep = modelinfo.accepts_logits_to_keep(model)
        self.page_size = page_size
        self.prefill_chunk = prefill_chunk
        self.max_batch = max_batch
        host_pages = max(0, host_tier_tokens // page_size)
        # The sliding layers' window, when the pool can release their pages (one window shared by
        # every sliding layer; not with a host tier, whose offloaded pages keep every layer).
        window = sliding_slice_windows(self.layout.layer_types, self.layout.windows).get("sliding_attention")
        self.window_layers = [i for i, t in enumerate(self.layout.layer_types) if t == "sliding_attention"] if window else []
        if host_pages or window_pool_tokens == 0:
            self.window_layers = []
        if pool_tokens is None:
            pool_tokens, auto_window = self._auto_pool_tokens(window)
            window_pool_tokens = auto_window if window_pool_tokens is None else window_pool_tokens
        elif window_pool_tokens is None:
            window_pool_tokens = pool_tokens
        num_pages = max(1, pool_tokens // page_size)
        window_pages = max(1, window_pool_tokens // page_size) if self.window_layers else 0
        self.pool = KVPool(self.layout.shape, num_pages=num_pages, page_size=page_size, device=self.device,
                           host_pages=host_pages, window_layers=self.window_layers, window_pages=window_pages)
        self.radix = RadixCache(
            num_pages, page_size, host_pages=host_pages, on_offload=self.pool.offload, on_reload=self.pool.reload,
            window_tokens=window if self.window_layers else None, window_pages=window_pages,
        )
        self._eos = _eos_ids(model, tokenizer)
        self._counts = dict.fromkeys(
            ("requests", "prompt_tokens", "cached_tokens", "prefill_tokens_computed", "decode_tokens", "hot_reused_tokens"), 0
        )
        implementation, self.batch_check_diff, self.batching_off_reason = modelinfo.batch_decode_check(model, self.layout)
        self.fast_decoder, self.fast_decode_off_reason = self._fast_decoder(
            fast_decode, batch_pack_bytes if pack_min_bytes is not None else 0)
        self._grammar_index = TokenizerIndex(tokenizer, self.vocab_size)
        self.kv = BatchKV(self.layout.shape, rows=1, capacity=_INITIAL_ROW_CAPACITY, device=self.device,
                          layer_types=self.layout.layer_types, windows=self.layout.windows)
        self._scheduler = Scheduler(
            model=self.model, tokenizer=tokenizer, kv=self.kv, pool=self.pool, radix=self.radix, eos=self._eos,
            counts=self._counts, prefill_chunk=prefill_chunk, interleave_chunk=interleave_chunk,
            forward=ModelForward(model, logits_to_keep=self._logits_to_keep, batch_mask_implementation=implementation),
            max_batch=max_batch, fast_decoder=self.fast_decoder,
        )

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_pretrained(
        cls,
        path_or_hub_id: str | Path,
        *,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        pool_tokens: int | None = None,
        page_size: int = 1,
        host_tier_tokens: int = 0,
        model_name: str | None = None,
        local_files_only: bool = False,
        trust_remote_code: bool = False,
        prefill_chunk: int = 4096,
        max_batch: int = 8,
        interleave_chunk: int = 256,
        window_pool_tokens: int | None = None,
        pack_min_bytes: int | None = cpu_linear.DEFAULT_MIN_PACK_BYTES,
        fast_decode: bool = True,
        batch_pack_bytes: int = cpu_linear.DEFAULT_BATCH_PACK_BYTES,
        verbose: bool = False,
        threads: int | None = None,
        tune: bool = True,
        progress: LoadProgress | None = None,
    ) -> "TransformersEngine":
        """Load a causal LM and its tokenizer from a local folder or a hub id. `verbose`: show
        transformers' progress bars and load logs (silenced otherwise). The loading runs on a
        thread of its own (`compute_thread`), so the main thread keeps no OpenMP pool that would
        slow the scheduler's decode steps. `threads`: the CPU threads of the engine's work, for the
        whole process (None: the process's setting, by default the CPUs other processes leave free,
        looked at again for each burst of requests; `engine.cpu_threads`). `progress`: reports
        each load stage (`engine.load_progress`)."""
        if threads is not None:
            cpu_threads.configure(threads)
        progress = progress or LoadProgress()

        def load() -> "TransformersEngine":
            cpu_threads.apply()
            from transformers import AutoModelForCausalLM, AutoTokenizer

            target = loading.resolve_target(device)
            gguf = loading.gguf_path(path_or_hub_id)
            read_started = progress.clock()
            if gguf is not None:  # read by the engine itself, quantized matrices kept as shipped by default
                weights_dtype = loading.gguf_weights_dtype(dtype, target)
                copies = batch_pack_bytes if weights_dtype is not None and target.type == "cpu" and fast_decode else 0
                loaded = loading.load_gguf_model(gguf, weights_dtype, pool_tokens=pool_tokens,
                                                 default_pool_bytes=_CPU_POOL_BYTES if target.type == "cpu" else 0,
                                                 copy_bytes=copies)
                model, tokenizer, source, is_folder = loaded.model.to(target), loaded.tokenizer, str(gguf), True
            else:
                torch_dtype = loading.resolve_dtype(dtype, target)
                (source, is_folder) = loading.resolve_source(path_or_hub_id)
                device_map = loading.device_map_for(target)
                try:
                    with loading.quiet_transformers(verbose):
                        tokenizer = AutoTokenizer.from_pretrained(
                            source, local_files_only=local_files_only or is_folder, trust_remote_code=trust_remote_code
                        )
                        model = AutoModelForCausalLM.from_pretrained(
                            source,
                            dtype=torch_dtype,
                            local_files_only=local_files_only or is_folder,
                            trust_remote_code=trust_remote_code,
                            device_map=device_map,
                        )
                except (OSError, ValueError, ImportError) as exc:
                    raise EngineError(f"could not load model {source!r}: {exc}") from exc
                if device_map is None:
                    model = model.to(target)
            progress.stage("read", seconds=progress.clock() - read_started, nbytes=_read_bytes(gguf, model),
                           detail=str(gguf or source))
            name = model_name or (gguf.stem if gguf is not None else Path(source).name if is_folder else source)
            return cls(
                model,
                tokenizer,
                model_name=name,
                pool_tokens=pool_tokens,
                page_size=page_size,
                host_tier_tokens=host_tier_tokens,
                prefill_chunk=prefill_chunk,
                max_batch=max_batch,
                interleave_chunk=interleave_chunk,
                window_pool_tokens=window_pool_tokens,
                pack_min_bytes=pack_min_bytes,
                fast_decode=fast_decode,
                batch_pack_bytes=batch_pack_bytes,
                tune=tune,
                progress=progress,
            )

        engine = off_main_thread(load)
        progress.ready(f"threads {cpu_threads.policy().describe()}")
        return engine

    def _pack_weights(self, min_bytes: int | None, max_batch: int) -> int:
        """Bytes the packed weight copies add to the model's own (see `engine.cpu_linear`)."""
        param = next(self.model.parameters())
        if min_bytes is None or param.device.type != "cpu":
            return 0
        if param.dtype == torch.bfloat16:
            return cpu_linear.pack_all_linears(self.model)
        if param.dtype != torch.float32:
            return 0
        cpu_linear.store_transposed(self.model)
        if max_batch > 2:  # one or two rows keep MKL's path
            return cpu_linear.pack_large_linears(self.model, min_bytes, decode_tuning.ONEDNN_BATCH_HINT)
        return 0

    def _fast_decoder(self, enabled: bool, batch_pack_bytes: int) -> tuple[FastDecoder | None, str]:
        """(the checked fast decode step or None, why it is off), with the fastest weight copies
        for its steps of each row count (`engine.decode_tuning`) within `batch_pack_bytes`. The weights
        move to huge pages here (`engine.huge_pages`), after the build, which concatenates
        projections into new matrices; the step's products are then taken on the moved weights."""
        decoder, reason = None, "turned off"
        self.step_layouts = decode_tuning.Tuning()
        with self.progress.timed("pack", detail="fast decode step, weights on huge pages") as info:
            if enabled:
                try:
                    decoder = build_fast_decoder(self.model, self.layout.layer_types, self.layout.windows)
                except FastDecodeUnsupported as exc:
                    reason = str(exc)
            if decoder is None:
                self.huge_page_bytes = huge_pages.move_to_huge_pages(self.model.parameters())
            else:
                self.huge_page_bytes = decoder.move_weights_to_huge_pages()
            info["nbytes"] = self.huge_page_bytes
        if decoder is None:
            return None, reason
        try:
            with self.progress.timed("check", detail="fast decode step against the model's forward"):
                check_fast_decoder(decoder, self.model, self.layout)
        except FastDecodeUnsupported as exc:
            return None, str(exc)
        rows = 1 if self.batching_off_reason else self.max_batch  # the most rows a step will have
        cache = None
        if self._tune and self.device.type == "cpu" and batch_pack_bytes > 0:
            cache = TuningCache(decoder.model, max_batch=rows, budget_bytes=batch_pack_bytes)
        with self.progress.timed("tuning") as info:
            self.step_layouts = decode_tuning.tune(decoder, self.layout, rows, batch_pack_bytes,
                                                   timed=self._tune, cache=cache)
            info["nbytes"], info["detail"] = self.step_layouts.nbytes, self.step_layouts.note()
        self.packed_weight_bytes += decoder.packed_bytes + self.step_layouts.nbytes
        if not self.step_layouts.steps_use_model_copies:
            # The steps run on copies of their own: a large head's oneDNN copy would serve only
            # prompts that keep every position's logits (MKL on the weight does those well).
            self.packed_weight_bytes -= cpu_linear.unpack_large_linears(self.model)
            decoder.take_plain_products()
            huge_pages.return_freed_memory()
        return decoder, ""

    @property
    def batch_pack_sizes(self) -> tuple[int, ...]:
        """Row counts whose decode steps run on weight copies of their own (`engine.decode_tuning`)."""
        return self.fast_decoder.batch_pack_sizes if self.fast_decoder is not None else ()

    def _auto_pool_tokens(self, window: int | None) -> tuple[int, int]:
        """(pool tokens, window-pool tokens) that fit the memory budget."""
        shape = self.layout.shape
        if self.device.type == "cuda":
            free, _total = torch.cuda.mem_get_info(self.device)
            budget = int(free * _GPU_POOL_FRACTION)
        else:
            budget = _CPU_POOL_BYTES
        per_layer = shape.bytes_per_token // shape.layers
        if not self.window_layers or not window:
            tokens = max(self.page_size, min(budget // shape.bytes_per_token, _MAX_AUTO_POOL_TOKENS))
            return tokens, tokens
        full = per_layer * (shape.layers - len(self.window_layers))
        sliding = per_layer * len(self.window_layers)
        # Window pages for a share of the pool, but at least two windows per batch row.
        tokens = budget // (full + sliding // _WINDOW_SHARE)
        windowed = max(tokens // _WINDOW_SHARE, 2 * self.max_batch * window)
        tokens = max(self.page_size, min((budget - windowed * sliding) // max(full, 1), _MAX_AUTO_POOL_TOKENS))
        return tokens, min(windowed, tokens)

    # ------------------------------------------------------------------ Engine protocol

    @property
    def tokenizer(self):
        return self._tokenizer

    def generate(self, request: GenerationRequest) -> GenerationResult:
        result = None
        for item in self.stream(request):
            if isinstance(item, GenerationResult):
                result = item
        assert result is not None
        return result

    def stream(self, request: GenerationRequest) -> Iterator[StreamItem]:
        """`PrefillStarted` (cache matched, nothing computed yet), chunks as tokens are produced, then
        the `GenerationResult`. Prefill starts once the consumer asks for the item after
        `PrefillStarted`; closing the generator early frees the request's row at once (what was
        computed stays cached)."""
        prompt = self._validate(request)
        seq = make_sequence(request, prompt)
        if request.grammar is not None:
            seq.constraint = Constraint(self._grammar_index, request.grammar)
        seq = self._scheduler.submit(seq)
        try:
            while True:
                item = seq.out.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, PrefillStarted):
                    self._scheduler.ack(seq)
                elif isinstance(item, GenerationResult):
                    return
        finally:
            self._scheduler.cancel(seq)

    def metrics(self) -> dict[str, float]:
        """Counters are whole numbers (ints); `hit_rate` is the one ratio."""
        c = self._counts
        stats = self.radix.stats
        return {
            "requests": c["requests"],
            "prompt_tokens": c["prompt_tokens"],
            "cached_tokens": c["cached_tokens"],
            "hit_rate": c["cached_tokens"] / c["prompt_tokens"] if c["prompt_tokens"] else 0.0,
            "prefill_tokens_computed": c["prefill_tokens_computed"],
            "prefill_tokens_saved": c["cached_tokens"],
            "decode_tokens": c["decode_tokens"],
            "running_requests": self._scheduler.running,
            "max_batch": self.max_batch,
            "peak_decode_batch": self._scheduler.peak_batch,
            "batched_decode": int(self._scheduler.decoder.can_batch),
            "fast_decode": int(self.fast_decoder is not None),
            "batch_rows": self.kv.rows,
            "batch_buffer_bytes": self.kv.buffer.numel() * self.kv.buffer.element_size(),
            "packed_weight_bytes": self.packed_weight_bytes,
            "huge_page_weight_bytes": self.huge_page_bytes,
            "decode_threads": self._scheduler.worker_threads,
            "hot_buffer_reused_tokens": c["hot_reused_tokens"],
            "page_size": self.page_size,
            "pool_pages_used": self.radix.used_pages,
            "pool_pages_total": self.radix.num_pages,
            "pool_tokens_total": self.radix.num_pages * self.page_size,
            "pool_bytes": self.pool.device_bytes,
            "kv_bytes_per_token_all_layers": self.layout.shape.bytes_per_token,
            "kv_bytes_per_cached_token": self.kv_bytes_per_cached_token(),
            "window_pages_used": self.radix.window_used_pages,
            "window_pages_total": self.radix.window_pages,
            "window_released_pages": stats.window_released_pages,
            "window_shortened_hits": stats.window_shortened_hits,
            "evicted_pages": stats.evicted_pages,
            "host_tier_pages_used": self.radix.host_used_pages,
            "host_tier_pages_total": self.radix.host_pages,
            "host_tier_offloaded_pages": stats.offloaded_pages,
            "host_tier_hit_tokens": stats.host_hit_tokens,
            "pins_refused": stats.pinned_skipped,
            "pins_active": self.radix.active_pins,
            "pinned_pages": self.radix.pinned_pages,
        }

    # ------------------------------------------------------------------ extra public API

    def prefill_logits(self, prompt_ids: list[int], salt: str = "") -> tuple[torch.Tensor, int]:
        """Serve `prompt_ids` exactly like a request's prefill (cache lookup, suffix forward,
        write-back) and return the float32 logits of every recomputed position
        (`[len(prompt) - cached, vocab]`) with the number of cached tokens. Used to verify that
        cache-served logits equal a full recompute."""
        request = GenerationRequest(prompt_ids=list(prompt_ids), params=SamplingParams(max_tokens=1), salt=salt)
        prompt = self._validate(request)
        seq = self._scheduler.submit(make_sequence(request, prompt, logits_only=True))
        try:
            item = seq.out.get()
        finally:
            self._scheduler.cancel(seq)
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, PrefillLogits)
        return item.logits, item.cached_tokens

    def kv_bytes_per_cached_token(self) -> int:
        """Pool bytes the cached tokens hold, per cached token: every layer's K/V without
        sliding-window pages; with them, the full-attention layers plus the window pages in use."""
        pool = self.pool
        used = self.radix.used_pages
        if not used:
            return 0
        total = used * pool.bytes_per_token(pool.full_layers)
        if pool.windowed:
            total += self.radix.window_used_pages * pool.bytes_per_token(pool.window_layers)
        return total // used

    def reset_cache(self) -> None:
        """Forget every cached prefix (e.g. after swapping weights); waits for running requests."""
        self._scheduler.reset()

    # ------------------------------------------------------------------ internals

    def _validate(self, request: GenerationRequest) -> list[int]:
        prompt = list(request.prompt_ids)
        if not prompt:
            raise EngineError("the prompt is empty")
        if not all(isinstance(t, int) and 0 <= t < self.vocab_size for t in prompt):
            raise EngineError(f"prompt token ids must be integers in [0, {self.vocab_size})")
        params = request.params
        validate_params(params)
        total = len(prompt) + params.max_tokens
        if total > self.max_context:
            raise ContextLengthError(
                f"this model's context window is {self.max_context} tokens, but the request needs {total} "
                f"({len(prompt)} in the prompt + {params.max_tokens} max_tokens); shorten the prompt or lower max_tokens"
            )
        for pin in request.pins:
            if not _valid_pin(pin):
                raise EngineError(f"each pin must be (prefix length in tokens >= 0, finite TTL in seconds >= 0); got {pin!r}")
        return prompt


def _read_bytes(gguf: Path | None, model) -> int:
    """What the read stage brought in: the GGUF file, else the weights as loaded."""
    if gguf is not None:
        return gguf.stat().st_size
    return sum(t.numel() * t.element_size() for t in model.parameters())


def _valid_pin(pin) -> bool:
    try:
        length, ttl = pin
    except (TypeError, ValueError):
        return False
    return (isinstance(length, int) and length >= 0 and isinstance(ttl, (int, float))
            and math.isfinite(ttl) and ttl >= 0)


def _eos_ids(model, tokenizer) -> frozenset[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return frozenset(ids)
