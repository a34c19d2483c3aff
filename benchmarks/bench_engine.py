"""End-to-end engine ratios on a random-weight Llama built offline (no downloads).

Measured in one run and printed as ratios:
- warm / cold time to first token for a 4,096-token shared prefix + 64-token suffix (goal <= 0.06);
  warm is reported twice: right after another request on the same prefix (the sequence buffer
  is reused in place) and after an unrelated request (the prefix is gathered from the pool);
- warm / oracle (goal <= 1.15), oracle = the model's forward over the same 64-token suffix on an
  already-built cache object, no lookup: the faster of a transformers `DynamicCache` (copied
  before each run, copy not timed) and the engine's own `SequenceCache`;
- prefill tokens computed / ideal over a multi-turn agent trace (goal <= 1.01): ideal counts, per
  request, the prompt tokens whose K/V no earlier request had computed (at least 1: the last
  prompt token always produces the first logits);
- decode tokens/s vs transformers `generate` on the same model and prompt (goal >= 1.0x), and vs
  llama.cpp (`llama-cpp-python`, `llama_cpp_peer.py`) when it is installed and `--gguf` names a GGUF of
  the same model, re-quantized by llama.cpp to the engine's float32 (`--llama-ftype`)
  (goal >= 0.9x); the systems alternate run by run and each reports its median, so load from
  other processes on a shared machine hits all of them alike;
- aggregate decode tokens/s with 1 / 2 / 4 / 8 concurrent sessions (continuous batching; goal at
  4 sessions >= 2.5x one session), over the decode steps' span and over wall time with prefill;
- the same model in bfloat16 (`--compare-dtypes`; by default on a CPU with oneDNN bfloat16):
  decode tok/s, logits on a fixed prompt against float32, and 4 sessions / 1;
- K/V bytes per cached token as the pool accounts them after one long request, against every
  layer at every position and against the theoretical minimum (a sliding-window layer needs only
  its window).

    .venv/bin/python benchmarks/bench_engine.py                       # ~25M params, CPU
    .venv/bin/python benchmarks/bench_engine.py --model-size 0.5b     # on a GPU machine (bf16, SDPA)
    .venv/bin/python benchmarks/bench_engine.py --model gemma-3-270m-q4_k_m.gguf \
        --gguf gemma-3-270m-q4_k_m.gguf --skip trace                  # a real model, vs llama.cpp
"""

from __future__ import annotations

import argparse
import copy
import os
import threading
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch

from hitrate.engine import cpu_linear, cpu_threads
from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.compute_thread import off_main_thread
from hitrate.engine.radix import common_prefix_length
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.seq_cache import SequenceCache
from hitrate.engine.verify import DEFAULT_PROMPT, against_float32
from hitrate.engine.tiny import build_tiny_model
from llama_cpp_peer import FTYPES

# name -> build_tiny_model shape (Llama architecture)
MODEL_SIZES = {
    "25m": dict(vocab_size=32000, hidden=384, layers=8, heads=6, kv_heads=2, intermediate=1152,
                config_overrides={"tie_word_embeddings": True}),
    "0.5b": dict(vocab_size=151936, hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864,
                 config_overrides={"tie_word_embeddings": True}),
    "1.5b": dict(vocab_size=151936, hidden=1536, layers=28, heads=12, kv_heads=2, intermediate=8960,
                 config_overrides={"tie_word_embeddings": True}),
}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rand_tokens(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(10, vocab) for _ in range(n)]


def first_token_request(prompt: list[int], salt: str = "") -> GenerationRequest:
    return GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=1), salt=salt)


def on_fresh_thread(work):
    """`work()` on a short-lived thread: the bench's own forwards (generate, the oracles) must not
    leave an OpenMP pool on the main thread, which would slow the engine's scheduler thread
    (`hitrate.engine.compute_thread`) and so the comparison. A warm-up matmul starts the fresh
    thread's pool before the timed work."""
    def warmed():
        torch.randn(1, 640) @ torch.randn(640, 2048)
        return work()
    return off_main_thread(warmed, name="bench-peer")


def measure_ttft(engine: TransformersEngine, args, rng: random.Random) -> dict:
    """Medians over interleaved rounds, so that load changes on a shared machine hit every
    variant alike: each round runs warm (pool gather), warm (buffer reused) and both oracles."""
    vocab = engine.vocab_size
    prefix = rand_tokens(rng, args.prefix, vocab)
    engine.generate(first_token_request(rand_tokens(rng, 256, vocab), salt="warmup"))  # first-call setup
    colds = []
    for i in range(args.cold_runs):
        result = engine.generate(first_token_request(prefix + rand_tokens(rng, args.suffix, vocab), salt=f"cold-{i}"))
        assert result.cached_tokens == 0
        colds.append(result.ttft_s)
    oracle = on_fresh_thread(lambda: Oracle(engine, prefix, args.suffix))
    times: dict[str, list[float]] = {"warm_pool": [], "warm_hot": [], "oracle_dynamic": [], "oracle_sequence": []}
    for _ in range(args.warm_runs):
        engine.generate(first_token_request(rand_tokens(rng, 32, vocab), salt="other"))  # replaces the buffer
        result = engine.generate(first_token_request(prefix + rand_tokens(rng, args.suffix, vocab), salt="cold-0"))
        assert result.cached_tokens == args.prefix
        times["warm_pool"].append(result.ttft_s)
        result = engine.generate(first_token_request(prefix + rand_tokens(rng, args.suffix, vocab), salt="cold-0"))
        assert result.cached_tokens == args.prefix
        times["warm_hot"].append(result.ttft_s)
        suffix = rand_tokens(rng, args.suffix, vocab)
        times["oracle_dynamic"].append(on_fresh_thread(lambda: oracle.dynamic(suffix)))
        times["oracle_sequence"].append(on_fresh_thread(lambda: oracle.sequence(suffix)))
    return {"cold": statistics.median(colds), **{k: statistics.median(v) for k, v in times.items()}}


class Oracle:
    """Forward over the suffix on a ready cache object, then pick the first token: nothing else."""

    def __init__(self, engine: TransformersEngine, prefix: list[int], suffix_len: int) -> None:
        from transformers import DynamicCache

        self.model, self.device = engine.model, engine.device
        self.prefix_len = len(prefix)
        ids = torch.tensor([prefix], device=self.device)
        shape = engine.layout.shape
        self.ready = SequenceCache(layers=shape.layers, kv_heads=shape.kv_heads, head_dim=shape.head_dim,
                                   capacity=len(prefix) + suffix_len + 1, dtype=shape.dtype, device=self.device,
                                   sliding=engine.layout.sliding)
        self.dynamic_ready = DynamicCache(config=self.model.config)
        with torch.inference_mode():
            self.model(input_ids=ids, cache=self.ready, use_cache=True, logits_to_keep=1)
            self.model(input_ids=ids, cache=self.dynamic_ready, use_cache=True, logits_to_keep=1)

    def _time(self, suffix: list[int], cache) -> float:
        ids = torch.tensor([suffix], device=self.device)
        sync(self.device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            logits = self.model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits
            int(logits[0, -1].argmax())
        return time.perf_counter() - t0

    def dynamic(self, suffix: list[int]) -> float:
        return self._time(suffix, copy.deepcopy(self.dynamic_ready))  # the copy is made before timing starts

    def sequence(self, suffix: list[int]) -> float:
        self.ready.truncate(self.prefix_len)
        return self._time(suffix, self.ready)


def measure_agent_trace(engine: TransformersEngine, args, rng: random.Random) -> dict:
    """Interleaved agent sessions: system + tools prefix, then per turn the model's reply and a
    tool result are appended to the conversation."""
    vocab = engine.vocab_size
    system = rand_tokens(rng, args.trace_system, vocab)
    sessions = [{"conv": system + rand_tokens(rng, 120, vocab), "turns": 0} for _ in range(args.trace_sessions)]
    seen: list[list[int]] = []  # every sequence whose K/V some request computed
    computed_before = engine.metrics()["prefill_tokens_computed"]
    ideal = 0
    requests = 0
    while sessions:
        session = rng.choice(sessions)
        prompt = session["conv"]
        best = max((common_prefix_length(prompt, s) for s in seen), default=0)
        ideal += max(1, len(prompt) - best)
        reply_len = rng.randint(20, 60)
        result = engine.generate(
            GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=reply_len, ignore_eos=True), salt="agent")
        )
        requests += 1
        seen.append(prompt + result.token_ids[:-1])
        session["conv"] = prompt + result.token_ids + rand_tokens(rng, rng.randint(30, 200), vocab)
        session["turns"] += 1
        if session["turns"] == args.trace_turns:
            sessions.remove(session)
    computed = engine.metrics()["prefill_tokens_computed"] - computed_before
    return {"requests": requests, "computed": computed, "ideal": ideal}


class _TokenClock:
    """A `generate` streamer that stamps the time each token arrives (the prompt arrives first)."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def put(self, value) -> None:
        self.stamps.append(time.perf_counter())

    def end(self) -> None:
        pass


def measure_decode(engine: TransformersEngine, args, rng: random.Random,
                   others: dict[str, TransformersEngine] | None = None,
                   forward_peer: TransformersEngine | None = None) -> dict:
    """Decode tokens/s, first token to last token, for the engine, transformers `generate` and
    llama.cpp when available, on prompts of the same length (greedy, fixed length); `others`: the
    same model in other dtypes, reported as "ours <dtype>"; `forward_peer`: the same engine with
    its decode steps through the model's forward (`fast_decode=False`). The systems alternate within every
    round; each reports its median over the rounds."""
    model, device = engine.model, engine.device
    prompt = rand_tokens(rng, args.decode_prompt, engine.vocab_size)
    n = args.decode_tokens
    llama = llama_cpp_run(args)

    def ours(salt: str, which: TransformersEngine = engine) -> float:
        params = SamplingParams(max_tokens=n, ignore_eos=True)
        result = which.generate(GenerationRequest(prompt_ids=prompt, params=params, salt=salt))
        assert len(result.token_ids) == n
        return (n - 1) / (result.total_s - result.ttft_s)

    def theirs() -> float:
        clock = _TokenClock()
        with torch.inference_mode():
            out = model.generate(torch.tensor([prompt], device=device), max_new_tokens=n, min_new_tokens=n,
                                 do_sample=False, pad_token_id=engine.tokenizer.pad_token_id, streamer=clock)
        sync(device)
        assert out.shape[1] == len(prompt) + n and len(clock.stamps) == n + 1
        return (n - 1) / (clock.stamps[-1] - clock.stamps[1])

    systems = {"ours": lambda i: ours(f"decode-{i}"), "transformers": lambda i: on_fresh_thread(theirs)}
    if forward_peer is not None:
        systems["ours, model forward"] = lambda i: ours(f"decode-{i}", forward_peer)
    for name, other in (others or {}).items():
        systems[f"ours {name}"] = lambda i, other=other: ours(f"decode-{i}", other)
    if llama is not None:
        systems["llama.cpp"] = lambda i: on_fresh_thread(llama)
    for run in systems.values():  # warm-up: first-call setup, not timed
        run(-1)
    rates: dict[str, list[float]] = {name: [] for name in systems}
    for i in range(args.decode_runs):
        for name, run in systems.items():
            rates[name].append(run(i))
    return {name: statistics.median(values) for name, values in rates.items()}


def measure_kv_bytes(engine: TransformersEngine, args, rng: random.Random) -> dict:
    """Pool bytes per cached token after one request of `--kv-prompt` tokens on an empty cache,
    against every layer at every position and the theoretical minimum for that length."""
    engine.reset_cache()
    prompt = rand_tokens(rng, args.kv_prompt, engine.vocab_size)
    result = engine.generate(GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=4, ignore_eos=True),
                                               salt="kv-bytes"))
    length = len(prompt) + len(result.token_ids) - 1  # what the pool caches: prompt + reply minus the last token
    layout = engine.layout
    per_layer = layout.shape.bytes_per_token // layout.shape.layers
    windows = [w if t == "sliding_attention" else None for t, w in zip(layout.layer_types, layout.windows)]
    theoretical = sum(min(length, w) if w else length for w in windows) * per_layer / length
    m = engine.metrics()
    return {"tokens": length, "accounted": m["kv_bytes_per_cached_token"], "all_layers": m["kv_bytes_per_token_all_layers"],
            "theoretical": theoretical, "window_layers": len(engine.window_layers), "layers": layout.shape.layers}


def measure_concurrency(engine: TransformersEngine, args, rng: random.Random) -> dict[int, dict[str, float]]:
    """Aggregate tokens/s with k sessions started together, median over runs, two ways:
    - "wall": all generated tokens over the wall time from the start to the last session's end
      (the prefill of every prompt included);
    - "decode": the tokens after each session's first over the span from the first session's
      first token to the last session's last, both stamped by the engine's worker thread
      (`ttft_s`, `total_s`): the decode steps alone.
    Not the consumers' arrival times: consumer threads receive tokens in bursts when the
    scheduler holds the GIL, so those say little about when a token was computed."""
    vocab = engine.vocab_size
    n = args.concurrent_tokens
    counts_k = [k for k in args.sessions if k <= engine.max_batch]
    runs: dict[int, dict[str, list[float]]] = {k: {"wall": [], "decode": []} for k in counts_k}
    # Every round runs each session count once, so load drift on a shared machine hits them alike.
    for run in range(args.concurrent_runs):
        for k in counts_k:
            prompts = [rand_tokens(rng, args.concurrent_prompt, vocab) for _ in range(k)]
            counts = [0] * k
            spans: list[tuple[float, float]] = [(0.0, 0.0)] * k  # (first token, last token) per session
            barrier = threading.Barrier(k + 1)

            def work(i: int) -> None:
                barrier.wait()
                params = SamplingParams(max_tokens=n, ignore_eos=True)
                called = time.perf_counter()
                result = engine.generate(GenerationRequest(prompt_ids=prompts[i], params=params, salt=f"c{k}-{run}-{i}"))
                counts[i] = len(result.token_ids)
                spans[i] = (called + result.ttft_s, called + result.total_s)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(k)]
            for t in threads:
                t.start()
            barrier.wait()
            started = time.perf_counter()
            for t in threads:
                t.join()
            runs[k]["wall"].append(sum(counts) / (time.perf_counter() - started))
            decode_span = max(last for _, last in spans) - min(first for first, _ in spans)
            runs[k]["decode"].append((sum(counts) - k) / decode_span)
    return {k: {way: statistics.median(v) for way, v in ways.items()} for k, ways in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-size", choices=sorted(MODEL_SIZES), default="25m")
    parser.add_argument("--model", help="a real model instead of the random Llama: a folder, hub id or .gguf file")
    parser.add_argument("--model-dir", type=Path, help="reuse / keep the built model here")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None, help="default: fp32 on CPU, bf16 on GPU")
    parser.add_argument("--prefix", type=int, default=4096)
    parser.add_argument("--suffix", type=int, default=64)
    parser.add_argument("--cold-runs", type=int, default=3)
    parser.add_argument("--warm-runs", type=int, default=9)
    parser.add_argument("--trace-system", type=int, default=2000)
    parser.add_argument("--trace-sessions", type=int, default=3)
    parser.add_argument("--trace-turns", type=int, default=6)
    parser.add_argument("--decode-prompt", type=int, default=512)
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--decode-runs", type=int, default=5)
    parser.add_argument("--bandwidth-gbps", type=float, default=None,
                        help="device memory bandwidth, for the decode ratio to the bandwidth limit")
    parser.add_argument("--gguf", type=Path, help="a GGUF of a model to time llama.cpp on (optional)")
    parser.add_argument("--llama-ftype", choices=FTYPES, default="f32",
                        help="the precision llama.cpp runs --gguf at: re-quantized by llama.cpp to f32 (the engine's "
                             "default precision, so the same arithmetic) or f16, or as-is")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--concurrent-prompt", type=int, default=64)
    parser.add_argument("--concurrent-tokens", type=int, default=96)
    parser.add_argument("--concurrent-runs", type=int, default=3)
    parser.add_argument("--kv-prompt", type=int, default=4096)
    parser.add_argument("--compare-dtypes", nargs="*", default=None,
                        help="also time the model in these dtypes (decode, logits vs the main dtype, 4 sessions); "
                             "default: bfloat16 when the engine runs float32 on a CPU with oneDNN bfloat16")
    parser.add_argument("--skip", nargs="*", default=[], choices=["ttft", "trace", "decode", "concurrency", "kv"])
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads of the engine and of the transformers baseline (default 1: on a shared "
                             "machine, multi-threaded matmuls stall whenever one thread is descheduled, which "
                             "swamps the ratios; 0 = the engine's automatic count, engine.cpu_threads)")
    args = parser.parse_args()
    cpu_threads.configure(args.threads or None)  # the engine's worker threads apply it
    if args.threads:
        torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    if args.model:
        source, kind = args.model, engine_model_name(args.model)
    else:
        source = args.model_dir or Path(tempfile.mkdtemp(prefix=f"hitrate-bench-{args.model_size}-"))
        if not (source / "config.json").exists():
            build_tiny_model(source, "llama", max_positions=32768, seed=0, initializer_range=0.02, **MODEL_SIZES[args.model_size])
        kind = "random Llama"
    engine = TransformersEngine.from_pretrained(source, device=args.device, dtype=args.dtype, pool_tokens=1 << 16)
    params = sum(p.numel() for p in engine.model.parameters())
    print(f"model: {kind} {params / 1e6:.1f}M params, {engine.device} {engine.layout.shape.dtype}, "
          f"attention {engine.model.config._attn_implementation}, torch threads {torch.get_num_threads()}, "
          f"built+loaded in {time.perf_counter() - t0:.1f}s")
    print(f"machine load (1/5/15 min): {load_average()} on {os.cpu_count()} CPUs")
    others = load_other_dtypes(source, args, engine)

    rng = random.Random(0)
    rows = []
    if "ttft" not in args.skip:
        ttft = measure_ttft(engine, args, rng)
        oracle = min(ttft["oracle_dynamic"], ttft["oracle_sequence"])
        print(f"TTFT prefix {args.prefix} + suffix {args.suffix}: cold {ttft['cold'] * 1e3:.1f} ms, "
              f"warm {ttft['warm_hot'] * 1e3:.1f} ms (buffer reused) / {ttft['warm_pool'] * 1e3:.1f} ms (pool gather), "
              f"oracle {oracle * 1e3:.1f} ms (DynamicCache {ttft['oracle_dynamic'] * 1e3:.1f}, "
              f"SequenceCache {ttft['oracle_sequence'] * 1e3:.1f})")
        rows += [
            ("warm / cold TTFT (buffer reused)", ttft["warm_hot"] / ttft["cold"], "<= 0.06"),
            ("warm / cold TTFT (pool gather)", ttft["warm_pool"] / ttft["cold"], "<= 0.06"),
            ("warm / oracle (buffer reused)", ttft["warm_hot"] / oracle, "<= 1.15"),
            ("warm / oracle (pool gather)", ttft["warm_pool"] / oracle, "<= 1.15"),
        ]
    if "trace" not in args.skip:
        trace = measure_agent_trace(engine, args, rng)
        print(f"agent trace: {trace['requests']} requests, prefill computed {trace['computed']:,.0f} tokens, "
              f"ideal {trace['ideal']:,} tokens")
        rows.append(("prefill computed / ideal", trace["computed"] / trace["ideal"], "<= 1.01"))
    if "decode" not in args.skip:
        forward_peer = None
        if engine.fast_decoder is not None:
            forward_peer = TransformersEngine.from_pretrained(source, device=args.device, dtype=args.dtype,
                                                              pool_tokens=1 << 16, fast_decode=False)
        decode = measure_decode(engine, args, rng, others, forward_peer)
        print(f"decode: {decode['ours']:.1f} tok/s vs transformers generate {decode['transformers']:.1f} tok/s "
              f"(prompt {args.decode_prompt}, {args.decode_tokens} tokens, median of {args.decode_runs} alternating runs)")
        if forward_peer is not None:
            print(f"decode steps through the model's forward (fast decode off): {decode['ours, model forward']:.1f} tok/s")
            rows.append(("decode tok/s, fast decode / model forward", decode["ours"] / decode["ours, model forward"], "-"))
        else:
            print(f"fast decode off: {engine.fast_decode_off_reason}")
        rows.append(("decode tok/s vs generate", decode["ours"] / decode["transformers"], ">= 1.0"))
        # Decode reads every weight once per token: tokens/s x weight bytes is the memory traffic
        # achieved, to hold against the device's bandwidth (`--bandwidth-gbps`, e.g. 4800 for an H200).
        weight_bytes = sum(p.numel() * p.element_size() for p in engine.model.parameters())
        achieved = decode["ours"] * weight_bytes / 1e9
        print(f"decode memory traffic: {achieved:.1f} GB/s of weights ({weight_bytes / 1e6:.0f} MB per token)"
              + (f", {achieved / args.bandwidth_gbps:.1%} of {args.bandwidth_gbps:.0f} GB/s" if args.bandwidth_gbps else ""))
        if args.bandwidth_gbps:
            rows.append(("decode / memory-bandwidth limit", achieved / args.bandwidth_gbps, "-> 1.0"))
        llama = decode.get("llama.cpp")
        if llama is None:
            print("llama.cpp: skipped (needs llama-cpp-python installed and --gguf MODEL.gguf)")
        else:
            print(f"llama.cpp ({args.llama_model.name}, {args.llama_ftype}): {llama:.1f} tok/s decode "
                  f"(same prompt length and threads, alternating runs)")
            rows.append(("decode tok/s vs llama.cpp", decode["ours"] / llama, ">= 0.9"))
    if "concurrency" not in args.skip:
        rates = measure_concurrency(engine, args, rng)
        print(f"concurrent sessions (prompt {args.concurrent_prompt}, {args.concurrent_tokens} tokens each, "
              f"max_batch {engine.max_batch}, batched decode {'on' if engine.metrics()['batched_decode'] else 'off'}):")
        print(f"  {'sessions':>8} {'decode tok/s':>13} {'vs 1 session':>13} {'wall tok/s':>11} {'vs 1 session':>13}"
              "   (decode: the decode steps' span; wall: prefill included)")
        one = rates[min(rates)]
        for k, rate in rates.items():
            print(f"  {k:>8} {rate['decode']:13.1f} {rate['decode'] / one['decode']:12.2f}x "
                  f"{rate['wall']:11.1f} {rate['wall'] / one['wall']:12.2f}x")
        if 4 in rates and 1 in rates:
            rows.append(("aggregate decode, 4 sessions / 1", rates[4]["decode"] / rates[1]["decode"], ">= 2.5"))
            rows.append(("  the same, wall time with prefill", rates[4]["wall"] / rates[1]["wall"], "-"))
    if others:
        print_dtype_table(engine, others, args, rng, decode if "decode" not in args.skip else {},
                          rates if "concurrency" not in args.skip else {})
    if "kv" not in args.skip:
        kv = measure_kv_bytes(engine, args, rng)
        print(f"K/V bytes per cached token after one {kv['tokens']:,}-token request: {kv['accounted']:,} accounted, "
              f"{kv['all_layers']:,} for every layer at every position, {kv['theoretical']:,.0f} theoretical "
              f"({kv['window_layers']} of {kv['layers']} layers slide)")
        rows.append(("K/V bytes per token accounted / theoretical", kv["accounted"] / kv["theoretical"], "-> 1.0"))
    print(f"machine load at the end (1/5/15 min): {load_average()}")
    print("ratios:")
    for name, value, goal in rows:
        print(f"  {name:<44} {value:8.3f}   goal {goal}")


def load_other_dtypes(source, args, engine: TransformersEngine) -> dict[str, TransformersEngine]:
    """The same model in `--compare-dtypes` (default: bfloat16 when the engine runs float32 on a
    CPU whose oneDNN has bfloat16 kernels)."""
    names = args.compare_dtypes
    if names is None:
        cpu_bf16 = engine.device.type == "cpu" and cpu_linear.onednn_available(torch.bfloat16)
        names = ["bfloat16"] if engine.layout.shape.dtype == torch.float32 and cpu_bf16 else []
    return {name: TransformersEngine.from_pretrained(source, device=args.device, dtype=name, pool_tokens=1 << 16)
            for name in names}


def print_dtype_table(engine: TransformersEngine, others: dict[str, TransformersEngine], args, rng: random.Random,
                      decode: dict, rates: dict[int, dict[str, float]]) -> None:
    """Per dtype: decode tok/s (from the alternating decode runs), logits on the verify command's
    prompt against the main engine's (float32 by default), and aggregate decode at 4 sessions / 1."""
    base = str(engine.layout.shape.dtype).removeprefix("torch.")
    ids = engine.tokenizer(DEFAULT_PROMPT)["input_ids"]  # text: random ids would exaggerate a real model's differences
    sessions = argparse.Namespace(**{**vars(args), "sessions": [1, 4]})
    print(f"dtypes (logits on `hitrate engine verify`'s {len(ids)}-token prompt against {base}; packed weights: "
          f"{engine.metrics()['packed_weight_bytes'] / 1e6:.0f} MB for {base}):")
    print(f"  {'dtype':<10} {'decode tok/s':>12} {'vs ' + base:>12} {'max |logit diff|':>17} {'of span':>8} "
          f"{'top token agrees':>17} {'4 sessions / 1':>15}   (4 / 1: decode steps' span)")
    scaling = rates[4]["decode"] / rates[1]["decode"] if 4 in rates and 1 in rates else float("nan")
    print(f"  {base:<10} {decode.get('ours', float('nan')):12.1f} {1.0:12.2f} {0.0:17.3g} {'':>8} {'100.0%':>17} "
          f"{scaling:15.2f}")
    for name, other in others.items():
        diff = on_fresh_thread(lambda: against_float32(other, engine, ids))
        tok_s = decode.get(f"ours {name}", float("nan"))
        other_rates = measure_concurrency(other, sessions, rng) if rates else {}
        scaling = (other_rates[4]["decode"] / other_rates[1]["decode"] if 4 in other_rates and 1 in other_rates
                   else float("nan"))
        print(f"  {name:<10} {tok_s:12.1f} {tok_s / decode.get('ours', float('nan')):12.2f} "
              f"{diff['float32_max_logit_diff']:17.3g} {diff['float32_max_logit_diff'] / diff['float32_logit_span']:8.1%} "
              f"{diff['float32_top_token_agreement']:17.1%} {scaling:15.2f}")


def llama_cpp_run(args):
    """llama.cpp's decode timer on `--gguf` re-quantized to `--llama-ftype` (same prompt length,
    token count and thread count); None without llama-cpp-python or --gguf."""
    if args.gguf is None:
        return None
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None
    from llama_cpp_peer import gguf_as, llama_cpp_decoder

    args.llama_model = gguf_as(args.gguf, args.llama_ftype, Path(tempfile.gettempdir()) / "hitrate-bench-gguf")
    return llama_cpp_decoder(args.llama_model, threads=args.threads or None, prompt_tokens=args.decode_prompt,
                             decode_tokens=args.decode_tokens)


def engine_model_name(source: str) -> str:
    return Path(source).name or source


def load_average() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
