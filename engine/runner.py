"""`TransformersEngine`: any transformers causal LM behind the `Engine` protocol, with an exact
cross-request prefix cache.

Per request (requests are serialised by one lock):
1. `radix.begin` matches the prompt's longest cached prefix (at most len - 1 tokens: the last
   prompt token is always recomputed, it produces the first logits) and locks it. The stream
   yields `PrefillStarted` with that split right away, before any compute.
2. The sequence cache is filled for positions [0, matched): kept from the previous request's
   buffer where the tokens agree (no copy), the rest gathered from the KV pool in one op.
3. Only prompt[matched:] goes through the model, in chunks; then decoding writes each new token's
   K/V in place.
4. `radix.finish` stores the K/V of every token the model consumed (prompt + generated, minus the
   last sampled token, which was never fed) into pool pages, so the next turn of a conversation
   hits the reply too, unlocks, and pins each of the request's `pins` for its own TTL.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
import math
from typing import Iterator

import torch

from hitrate.engine import loading, modelinfo
from hitrate.engine.api import (
    ContextLengthError,
    EngineError,
    GenerationChunk,
    GenerationRequest,
    GenerationResult,
    PrefillStarted,
    SamplingParams,
    StreamItem,
)
from hitrate.engine.kv_pool import KVPool
from hitrate.engine.radix import Lease, RadixCache, common_prefix_length
from hitrate.engine.sampling import make_generator, sample, validate_params
from hitrate.engine.seq_cache import SequenceCache
from hitrate.engine.textstream import IncrementalDecoder, StopStringFilter

_CPU_POOL_BYTES = 1 << 30  # default pool budget on CPU
_GPU_POOL_FRACTION = 0.4  # of the memory left free after loading the model
_MAX_AUTO_POOL_TOKENS = 1 << 20


@dataclass
class _Hot:
    """The previous request's sequence buffer: its first positions are reused when tokens agree."""

    cache: SequenceCache
    tokens: list[int]
    salt: str


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
    ) -> None:
        if page_size < 1 or prefill_chunk < 1:
            raise ValueError("page_size and prefill_chunk must be >= 1")
        self.model = model.eval()
        self._tokenizer = tokenizer
        self.model_name = model_name
        self.device = next(model.parameters()).device
        self.layout = modelinfo.kv_layout(model)
        self.self_check_diff = modelinfo.self_check(model, self.layout)
        self.max_context = modelinfo.max_context(model.config, tokenizer)
        self.vocab_size = int(model.config.vocab_size)
        self._logits_to_keep = modelinfo.accepts_logits_to_keep(model)
        self.page_size = page_size
        self.prefill_chunk = prefill_chunk
        if pool_tokens is None:
            pool_tokens = self._auto_pool_tokens()
        num_pages = max(1, pool_tokens // page_size)
        host_pages = max(0, host_tier_tokens // page_size)
        self.pool = KVPool(self.layout.shape, num_pages=num_pages, page_size=page_size, device=self.device, host_pages=host_pages)
        self.radix = RadixCache(
            num_pages, page_size, host_pages=host_pages, on_offload=self.pool.offload, on_reload=self.pool.reload
        )
        self._eos = _eos_ids(model, tokenizer)
        self._lock = threading.Lock()
        self._hot: _Hot | None = None
        self._counts = dict.fromkeys(
            ("requests", "prompt_tokens", "cached_tokens", "prefill_tokens_computed", "decode_tokens", "hot_reused_tokens"), 0
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
        verbose: bool = False,
    ) -> "TransformersEngine":
        """Load a causal LM and its tokenizer from a local folder or a hub id. `verbose`: show
        transformers' progress bars and load logs (silenced otherwise)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        target = loading.resolve_target(device)
        torch_dtype = loading.resolve_dtype(dtype, target)
        source, is_folder = loading.resolve_source(path_or_hub_id)
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
        name = model_name or (Path(source).name if is_folder else source)
        return cls(
            model,
            tokenizer,
            model_name=name,
            pool_tokens=pool_tokens,
            page_size=page_size,
            host_tier_tokens=host_tier_tokens,
            prefill_chunk=prefill_chunk,
        )

    def _auto_pool_tokens(self) -> int:
        per_token = self.layout.shape.bytes_per_token
        if self.device.type == "cuda":
            free, _total = torch.cuda.mem_get_info(self.device)
            budget = int(free * _GPU_POOL_FRACTION)
        else:
            budget = _CPU_POOL_BYTES
        return max(self.page_size, min(budget // per_token, _MAX_AUTO_POOL_TOKENS))

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
        the `GenerationResult`. The match is made under the engine lock, which is held from the first
        `next()` until the generator finishes or is closed: exhaust or close it."""
        prompt = self._validate(request)
        started = time.perf_counter()
        with self._lock:
            yield from self._serve(prompt, request, started)

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
            "hot_buffer_reused_tokens": c["hot_reused_tokens"],
            "page_size": self.page_size,
            "pool_pages_used": self.radix.used_pages,
            "pool_pages_total": self.radix.num_pages,
            "pool_tokens_total": self.radix.num_pages * self.page_size,
            "pool_bytes": self.pool.device_bytes,
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
        with self._lock:
            lease = self.radix.begin(prompt, salt, max_match=len(prompt) - 1)
            try:
                cache = self._prepare(prompt, lease, len(prompt) + 1, salt)
                logits = self._prefill(prompt[lease.matched :], cache, all_logits=True)
            except BaseException:
                self._fail(lease)
                raise
            self._commit(lease, prompt, cache, salt, pins=())
            self._count_prompt(len(prompt), lease.matched)
            return logits.float(), lease.matched

    def reset_cache(self) -> None:
        """Forget every cached prefix (e.g. after swapping weights)."""
        with self._lock:
            self.radix.reset()
            self._hot = None

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

    def _serve(self, prompt: list[int], request: GenerationRequest, started: float):
        params = request.params
        salt = request.salt
        lease = self.radix.begin(prompt, salt, max_match=len(prompt) - 1)
        try:
            yield PrefillStarted(prompt_tokens=len(prompt), cached_tokens=lease.matched)
        except BaseException:  # closed before prefill: nothing was computed, nothing to keep
            self.radix.abort(lease)
            raise
        seq = list(prompt)  # tokens whose K/V is in `cache`
        generated: list[int] = []
        try:
            # Room for a typical reply up front; longer generations grow the buffer by doubling.
            cache = self._prepare(prompt, lease, len(prompt) + min(params.max_tokens, 512), salt)
            logits = self._prefill(prompt[lease.matched :], cache, all_logits=False)[-1]
            self._count_prompt(len(prompt), lease.matched)
            rng = make_generator(params, self.device)
            decoder = IncrementalDecoder(self._tokenizer, prompt)
            text = StopStringFilter(params.stop)
            token = sample(logits, params, rng)
            ttft = time.perf_counter() - started
            finish_reason = "length"
            while True:
                generated.append(token)
                if token in self._eos and not params.ignore_eos:
                    finish_reason = "stop"
                    yield GenerationChunk(token_ids=[token], text=text.flush())
                    break
                delta = text.push(decoder.push(token))
                if text.stopped:
                    finish_reason = "stop"
                    yield GenerationChunk(token_ids=[token], text=delta)
                    break
                if len(generated) >= params.max_tokens:
                    yield GenerationChunk(token_ids=[token], text=delta + text.flush())
                    break
                yield GenerationChunk(token_ids=[token], text=delta)
                logits = self._forward([token], cache, keep_all=False)[0, -1]
                seq.append(token)
                self._counts["decode_tokens"] += 1
                token = sample(logits, params, rng)
        except GeneratorExit:
            # The consumer stopped reading (client went away): keep what was computed.
            self._commit(lease, seq, cache, salt, request.pins)
            raise
        except BaseException:
            self._fail(lease)
            raise
        self._commit(lease, seq, cache, salt, request.pins)
        yield GenerationResult(
            token_ids=generated,
            text=text.text,
            finish_reason=finish_reason,
            prompt_tokens=len(prompt),
            cached_tokens=lease.matched,
            completion_tokens=len(generated),
            ttft_s=ttft,
            total_s=time.perf_counter() - started,
        )

    def _prepare(self, prompt: list[int], lease: Lease, capacity: int, salt: str) -> SequenceCache:
        """A sequence cache holding the K/V of prompt[:lease.matched]."""
        matched = lease.matched
        hot = self._hot
        self._hot = None  # the buffer is about to change; it becomes hot again at commit
        valid = 0
        if hot is not None:
            cache = hot.cache
            if hot.salt == salt and matched:
                valid = min(matched, common_prefix_length(hot.tokens, prompt))
            cache.truncate(valid)
            cache.ensure_capacity(capacity)
            self._counts["hot_reused_tokens"] += valid
        else:
            shape = self.layout.shape
            cache = SequenceCache(
                layers=shape.layers,
                kv_heads=shape.kv_heads,
                head_dim=shape.head_dim,
                capacity=capacity,
                dtype=shape.dtype,
                device=self.device,
                sliding=self.layout.sliding,
            )
        if matched > valid:
            cache.load_from(self.pool, lease.pages, valid, matched)
        return cache

    def _prefill(self, suffix: list[int], cache: SequenceCache, *, all_logits: bool) -> torch.Tensor:
        chunks = range(0, len(suffix), self.prefill_chunk)
        outputs = []
        for start in chunks:
            piece = suffix[start : start + self.prefill_chunk]
            last = start + self.prefill_chunk >= len(suffix)
            if all_logits or last:
                outputs.append(self._forward(piece, cache, keep_all=all_logits)[0])
            else:
                self._forward(piece, cache, keep_all=False)
        self._counts["prefill_tokens_computed"] += len(suffix)
        return torch.cat(outputs) if len(outputs) > 1 else outputs[0]

    def _forward(self, ids: list[int], cache: SequenceCache, *, keep_all: bool) -> torch.Tensor:
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        kwargs = {} if keep_all or not self._logits_to_keep else {"logits_to_keep": 1}
        with torch.inference_mode():
            return self.model(input_ids=input_ids, cache=cache, use_cache=True, **kwargs).logits

    def _commit(
        self, lease: Lease, seq: list[int], cache: SequenceCache, salt: str, pins: tuple[tuple[int, float], ...]
    ) -> None:
        seq = seq[: cache.length]

        def write(start: int, end: int, pages) -> None:
            self.pool.write(pages, cache.kv_slice(start, end))

        self.radix.finish(lease, seq, write, pins=[(min(n, len(seq)), ttl) for n, ttl in pins])
        self._hot = _Hot(cache, seq, salt)

    def _fail(self, lease: Lease) -> None:
        self.radix.abort(lease)
        self._hot = None

    def _count_prompt(self, prompt_tokens: int, cached: int) -> None:
        c = self._counts
        c["requests"] += 1
        c["prompt_tokens"] += prompt_tokens
        c["cached_tokens"] += cached


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
