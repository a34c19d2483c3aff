"""Continuous batching: one worker thread runs every request's prefill and decode steps.

Each running request owns a row of a `BatchKV`. One scheduler step:
1. releases the rows of requests whose consumer went away (what was computed is kept in the
   prefix cache) and admits waiting requests into free rows: `radix.begin` matches and locks the
   longest cached prefix and the request's stream gets `PrefillStarted` right away;
2. runs prefill chunks of the requests whose consumers have taken `PrefillStarted`, oldest
   first, up to one chunk of tokens in all (a short chunk while others are decoding, so a long
   prompt delays each of their tokens by one chunk at most, instead of stalling them for the
   whole prompt);
3. runs one decode step over every decoding row at once (one forward of batch n), then samples,
   detokenizes and streams each row's token.

A finished request's row keeps its K/V: the next request that shares its tokens (usually the
next turn of the same conversation) is admitted into that row and reuses them in place; other
positions come from the KV pool in one copy. At the end `radix.finish` stores the K/V of every
token the model consumed (prompt + generated, minus the last sampled token) into pool pages.

Only the worker thread touches the model, the radix tree, the pool and the rows. Consumers talk
to it through each request's queue and the condition variable; the worker exits after a short
idle period and is started again by the next request, so an unused engine holds no thread.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

import torch

from hitrate.engine import cpu_threads
from hitrate.engine.api import GenerationChunk, GenerationResult, PrefillStarted
from hitrate.engine.batch_kv import BatchKV
from hitrate.engine.fast_decode import FastDecoder
from hitrate.engine.model_forward import ModelForward
from hitrate.engine.radix import RadixCache, common_prefix_length
from hitrate.engine.sampling import greedy, make_generator, sample
from hitrate.engine.sequence import PrefillLogits, Sequence
from hitrate.engine.textstream import IncrementalDecoder, StopStringFilter, plain_decode

_IDLE_EXIT_S = 0.5  # the worker thread exits after this long without work
_RELEASE_WAIT_S = 120.0  # a closing consumer waits at most this long for its row to be freed
# A request waits for another's prefill when that saves it at least this many prompt tokens.
_MIN_SHARED_TO_WAIT = 32
_MAX_SHARED_WAIT_S = 5.0  # ... but never longer than this


@dataclass
class _RowState:
    tokens: list[int] = field(default_factory=list)  # what the row's K/V holds
    salt: str = ""
    # Sliding-window pool: the row's sliding layers hold valid K/V from this position on only
    # (what was loaded from window pages); full layers hold every position of `tokens`.
    window_from: int = 0
    owner: Sequence | None = None


class Scheduler:
    def __init__(
        self,
        *,
        model,
        tokenizer,
        kv: BatchKV,
        pool,
        radix: RadixCache,
        eos: frozenset[int],
        counts: dict[str, int],
        prefill_chunk: int,
        interleave_chunk: int,
        forward: ModelForward,
        max_batch: int,
        fast_decoder: FastDecoder | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self._decode_text = plain_decode(tokenizer)  # chosen once, used by every request's decoder
        self.kv = kv
        self.pool = pool
        self.radix = radix
        self.eos = eos
        self.counts = counts
        self.prefill_chunk = prefill_chunk
        self.interleave_chunk = min(interleave_chunk, prefill_chunk)
        self.forward = forward  # prefill chunks, and decode steps without a fast decoder
        # Decode steps straight from the weights (`engine.fast_decode`) when the model has one
        # checked at load, else through the model's forward.
        self.decoder: FastDecoder | ModelForward = fast_decoder or forward
        self.device = kv.device
        self.rows = [_RowState() for _ in range(max_batch)]  # the buffer grows its rows on demand
        self._cv = threading.Condition()
        self._pending: deque[Sequence] = deque()
        self._active: list[Sequence] = []
        self._resets: list[threading.Event] = []
        self._worker: threading.Thread | None = None
        self.peak_batch = 0
        self.worker_threads = 0  # torch intra-op threads as the worker thread sees them (0: never started)

    # ------------------------------------------------------------------ consumer side

    def submit(self, seq: Sequence) -> Sequence:
        seq.acked = seq.acked or seq.logits_only
        with self._cv:
            self._pending.append(seq)
            self._ensure_worker()
            self._cv.notify_all()
        return seq

    def ack(self, seq: Sequence) -> None:
        with self._cv:
            seq.acked = True
            self._cv.notify_all()

    def cancel(self, seq: Sequence) -> None:
        """Stop `seq` and wait until its row is free (what it computed stays cached)."""
        if seq.released.is_set():
            return
        with self._cv:
            seq.cancelled = True
            self._ensure_worker()
            self._cv.notify_all()
        seq.released.wait(_RELEASE_WAIT_S)

    def reset(self) -> None:
        """Forget every cached prefix once no request is running."""
        done = threading.Event()
        with self._cv:
            self._resets.append(done)
            self._ensure_worker()
            self._cv.notify_all()
        done.wait()

    @property
    def running(self) -> int:
        return len(self._active)

    # ------------------------------------------------------------------ worker

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="engine-scheduler", daemon=True)
            self._worker.start()

    def _has_work(self) -> bool:
        if self._resets and not self._active:
            return True
        if any(s.cancelled for s in self._pending):
            return True
        if self._pending and self._free_row() is not None and not all(map(self._should_wait, self._pending)):
            return True
        return any(s.cancelled or s.state == "decode" or (s.state == "prefill" and s.acked) for s in self._active)

    def _work(self) -> None:
        # What the model's matmuls run on: intra-op settings are per thread, and the count is
        # chosen afresh for each burst of requests (`engine.cpu_threads`).
        self.worker_threads = cpu_threads.apply()
        while True:
            with self._cv:
                if not self._has_work():
                    self._cv.wait(_IDLE_EXIT_S)
                    if not self._has_work():
                        if not self._active and not self._pending:
                            self._worker = None
                            return
                        continue
                admitted = self._take_pending()
            try:
                self._step(admitted)
            except BaseException as exc:  # a defect: fail every running request rather than hang them
                for seq in list(self._active):
                    self._fail(seq, exc)

    def _take_pending(self) -> list[Sequence]:
        taken: list[Sequence] = []
        if self._resets and not self._active:
            self.radix.reset()
            for row in self.rows:
                row.tokens, row.salt = [], ""
            for done in self._resets:
                done.set()
            self._resets.clear()
        for seq in list(self._pending):
            if seq.cancelled:
                self._pending.remove(seq)
                seq.released.set()
                continue
            if self._resets:
                break
            row = self._free_row()
            if row is None:
                break
            if self._should_wait(seq):
                continue
            self._pending.remove(seq)
            seq.row = row
            self.rows[row].owner = seq
            self._active.append(seq)
            taken.append(seq)
        return taken

    def _should_wait(self, seq: Sequence) -> bool:
        """Hold a request back while another one is prefilling a longer common prefix: admitted
        after that prefill (which checkpoints the prompt into the cache), it hits the shared
        prefix instead of computing it a second time alongside."""
        if time.perf_counter() - seq.started > _MAX_SHARED_WAIT_S:
            return False  # the other request is stalled (its consumer does not read): go ahead
        salt = seq.request.salt
        sharing = [s for s in self._active if s.state in ("waiting", "prefill") and s.request.salt == salt]
        if not sharing:
            return False
        shared = max(common_prefix_length(s.prompt, seq.prompt) for s in sharing)
        shared = min(shared, len(seq.prompt) - 1)
        return shared - self.radix.match_length(seq.prompt, salt) >= _MIN_SHARED_TO_WAIT

    def _free_row(self) -> int | None:
        for i, row in enumerate(self.rows):
            if row.owner is None:
                return i
        return None

    def _step(self, admitted: list[Sequence]) -> None:
        for seq in admitted:
            self._admit(seq)
        for seq in [s for s in self._active if s.cancelled]:
            self._release(seq)
        decoding = [s for s in self._active if s.state == "decode"]
        # Prefill the acked requests oldest first, one chunk's worth of tokens in all: requests
        # that arrive together start decoding in the same step (and end together), rather than
        # one step apart each, which leaves the last steps running at ever smaller batches.
        budget = self.interleave_chunk if decoding else self.prefill_chunk
        for seq in [s for s in self._active if s.state == "prefill" and s.acked]:
            budget -= self._prefill_chunk(seq, budget)
            if budget <= 0:
                break
        if decoding:
            self._decode(decoding)
        self.peak_batch = max(self.peak_batch, len(decoding))

    # ------------------------------------------------------------------ admission

    def _admit(self, seq: Sequence) -> None:
        prompt = seq.prompt
        seq.lease = self.radix.begin(prompt, seq.request.salt, max_match=len(prompt) - 1)
        seq.cached = seq.lease.matched
        seq.row = self._best_row(seq)
        self.kv.ensure_rows(seq.row + 1)
        seq.state = "prefill"
        if not seq.logits_only:
            seq.out.put(PrefillStarted(prompt_tokens=len(prompt), cached_tokens=seq.lease.matched))

    def _best_row(self, seq: Sequence) -> int:
        """Move `seq` to the free row that already holds most of its matched prefix."""
        matched = seq.lease.matched
        best, best_valid = seq.row, self._valid(self.rows[seq.row], seq, matched)
        for i, row in enumerate(self.rows):
            if row.owner is None and best_valid < matched:
                valid = self._valid(row, seq, matched)
                if valid > best_valid:
                    best, best_valid = i, valid
        if best != seq.row:
            self.rows[seq.row].owner = None
            self.rows[best].owner = seq
        return best

    @staticmethod
    def _valid(row: _RowState, seq: Sequence, matched: int) -> int:
        if row.salt != seq.request.salt or not matched or not row.tokens:
            return 0
        return min(matched, common_prefix_length(row.tokens, seq.prompt))

    def _load(self, seq: Sequence) -> None:
        """Fill the row with prompt[:matched]: kept in place where the row already holds it."""
        row, matched = self.rows[seq.row], seq.lease.matched
        valid = self._valid(row, seq, matched)
        self.kv.truncate(seq.row, valid)
        window_start = None
        if self.pool.windowed:
            # The sliding layers need positions [matched - W, matched): kept in place when the row
            # already holds them, else copied from the window pages (which hold exactly those).
            need_from = max(0, matched - self.radix.window_tokens)
            if valid > 0 and row.window_from <= need_from <= valid:
                window_start = valid
            else:
                window_start = row.window_from = need_from
        if matched > valid or (window_start is not None and window_start < matched):
            self.kv.load_from(self.pool, seq.lease.pages, seq.row, valid, matched,
                              windows=seq.lease.windows, window_start=window_start)
        self.counts["hot_reused_tokens"] += valid
        row.tokens, row.salt = [], seq.request.salt  # the row is about to change
        seq.fed = list(seq.prompt[:matched])
        seq.loaded = True

    # ------------------------------------------------------------------ prefill

    def _prefill_chunk(self, seq: Sequence, chunk: int) -> int:
        """Feed the next piece of `seq`'s prompt, at most `chunk` tokens; returns how many it fed."""
        try:
            if not seq.loaded:
                self._load(seq)
            start = len(seq.fed)
            piece = seq.prompt[start : start + chunk]
            last = start + len(piece) >= len(seq.prompt)
            self.kv.ensure_capacity(start + len(piece) + (1 if last else 0))
            cache = self.kv.row_cache(seq.row)
            keep_all = seq.logits_only
            logits = self.forward(torch.tensor([piece], device=self.device), cache, keep_all=keep_all)
            cache.commit()
            seq.fed.extend(piece)
            self.counts["prefill_tokens_computed"] += len(piece)
            if keep_all:
                seq.logit_parts.append(logits[0].float())
            if not last:
                return len(piece)
            self._count_prompt(seq)
            self._checkpoint(seq)
            if seq.logits_only:
                logits_all = torch.cat(seq.logit_parts) if len(seq.logit_parts) > 1 else seq.logit_parts[0]
                self._commit(seq)
                seq.out.put(PrefillLogits(logits_all, seq.cached))
                self._free(seq)
                return len(piece)
            params = seq.request.params
            seq.rng = make_generator(params, self.device)
            seq.decoder = IncrementalDecoder(self.tokenizer, seq.prompt, decode=self._decode_text)
            seq.text = StopStringFilter(params.stop)
            token = self._pick(seq, logits[0, -1])
            seq.ttft = time.perf_counter() - seq.started
            seq.state = "decode"
            self._emit(seq, token)
            return len(piece)
        except Exception as exc:
            self._fail(seq, exc)
            return 0

    # ------------------------------------------------------------------ decode

    def _decode(self, seqs: list[Sequence]) -> None:
        # One row alone runs at batch size 1 whatever its index (no padding rows to compute).
        if len(seqs) == 1 or not self.decoder.can_batch:
            for seq in seqs:
                self._decode_one(seq)
            return
        n = max(s.row for s in seqs) + 1
        tokens = [0] * n
        for s in seqs:
            tokens[s.row] = s.next_token
        rows = [s.row for s in seqs]
        try:
            self.kv.ensure_capacity(max(self.kv.lengths[:n]) + 1)
            logits = self.decoder.decode_rows(self.kv, tokens)
        except Exception as exc:
            for seq in seqs:
                self._fail(seq, exc)
            return
        for r in rows:  # the padding rows' positions stay uncommitted
            self.kv.lengths[r] += 1
        self._after_decode(seqs, logits, rows)

    def _decode_one(self, seq: Sequence) -> None:
        try:
            self.kv.ensure_capacity(self.kv.lengths[seq.row] + 1)
            logits = self.decoder.decode_row(self.kv, seq.row, seq.next_token)
        except Exception as exc:
            self._fail(seq, exc)
            return
        self.kv.lengths[seq.row] += 1
        self._after_decode([seq], logits, [0])

    def _after_decode(self, seqs: list[Sequence], logits: torch.Tensor, index: list[int]) -> None:
        greedy_rows = [i for s, i in zip(seqs, index) if s.request.params.temperature == 0 and s.constraint is None]
        picks: dict[int, int] = {}
        if len(greedy_rows) == len(seqs):
            # Every row greedy: one argmax over the whole step (padding rows too, which costs less
            # than gathering the others) and one device-to-host transfer.
            picks = dict(enumerate(greedy(logits).tolist()))
        elif greedy_rows:
            rows = torch.tensor(greedy_rows, device=logits.device)
            picks = dict(zip(greedy_rows, greedy(logits.index_select(0, rows)).tolist()))
        for seq, i in zip(seqs, index):
            seq.fed.append(seq.next_token)
            self.counts["decode_tokens"] += 1
            try:
                token = picks[i] if i in picks else self._pick(seq, logits[i])
                self._emit(seq, token)
            except Exception as exc:
                self._fail(seq, exc)

    def _pick(self, seq: Sequence, logits: torch.Tensor) -> int:
        """Sample one token from a `[vocab]` row, inside the request's grammar if it has one."""
        if seq.constraint is None:
            return sample(logits, seq.request.params, seq.rng)
        token = sample(seq.constraint.apply(logits), seq.request.params, seq.rng)
        seq.constraint.consume(token)
        return token

    def _emit(self, seq: Sequence, token: int) -> None:
        """Stream a sampled token; finish the request when it ends generation."""
        params = seq.request.params
        seq.generated.append(token)
        seq.next_token = token
        text = seq.text
        finish = None
        if token in self.eos and not params.ignore_eos:
            finish, delta = "stop", text.flush()
        else:
            delta = text.push(seq.decoder.push(token))
            if text.stopped:
                finish = "stop"
            elif len(seq.generated) >= params.max_tokens:
                finish, delta = "length", delta + text.flush()
        seq.out.put(GenerationChunk(token_ids=[token], text=delta))
        if finish is None:
            return
        self._commit(seq)
        seq.out.put(GenerationResult(
            token_ids=list(seq.generated),
            text=text.text,
            finish_reason=finish,
            prompt_tokens=len(seq.prompt),
            cached_tokens=seq.cached,
            completion_tokens=len(seq.generated),
            ttft_s=seq.ttft,
            total_s=time.perf_counter() - seq.started,
        ))
        self._free(seq)

    # ------------------------------------------------------------------ ends

    def _commit(self, seq: Sequence) -> None:
        tokens = seq.fed[: self.kv.lengths[seq.row]]
        row = seq.row
        kv = self.kv

        def write(start: int, end: int, pages, windows=None) -> None:
            self.pool.write(pages, kv.kv_slice(row, start, end), windows)

        pins = [(min(n, len(tokens)), ttl) for n, ttl in seq.request.pins]
        self.radix.finish(seq.lease, tokens, write, pins=pins)
        self.rows[row].tokens = tokens
        self.rows[row].salt = seq.request.salt

    def _checkpoint(self, seq: Sequence) -> None:
        """Make the prompt's K/V hit-able now, while the reply is still being generated."""
        row, kv = seq.row, self.kv

        def write(start: int, end: int, pages, windows=None) -> None:
            self.pool.write(pages, kv.kv_slice(row, start, end), windows)

        seq.lease = self.radix.checkpoint(seq.lease, seq.fed[: kv.lengths[row]], write)

    def _release(self, seq: Sequence) -> None:
        """The consumer left: keep what was computed (nothing, if prefill never started)."""
        if seq.loaded:
            try:
                self._commit(seq)
            except Exception:
                self.radix.abort(seq.lease)
        elif seq.lease is not None:
            self.radix.abort(seq.lease)
        self._free(seq)

    def _fail(self, seq: Sequence, exc: BaseException) -> None:
        if seq.released.is_set():
            return
        if seq.lease is not None:
            self.radix.abort(seq.lease)
        if seq.row >= 0:
            self.rows[seq.row].tokens = []  # the row's content is unknown now
            self.rows[seq.row].window_from = 0
        seq.out.put(exc)
        self._free(seq)

    def _free(self, seq: Sequence) -> None:
        with self._cv:
            if seq in self._active:
                self._active.remove(seq)
            if seq.row >= 0 and self.rows[seq.row].owner is seq:
                self.rows[seq.row].owner = None
            seq.state = "done"
            seq.released.set()
            self._cv.notify_all()

    def _count_prompt(self, seq: Sequence) -> None:
        c = self.counts
        c["requests"] += 1
        c["prompt_tokens"] += len(seq.prompt)
        c["cached_tokens"] += seq.cached
