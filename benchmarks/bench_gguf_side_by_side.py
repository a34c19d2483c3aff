"""hitrate against llama.cpp on the same GGUF files as shipped: decode and prefill tokens/s, cold
and warm time to first token, peak RSS and load time, at each thread count, from one run.

Every measurement is a process of its own (one model in memory at a time), and the systems
alternate within each round (hitrate first in even rounds, llama.cpp first in odd ones), so load
from other processes on a shared machine hits both alike; each figure is the median over rounds.
The load average is printed with the table.

Per process: load the model (load s); a random prompt of `--prompt` tokens with one token out
(cold TTFT; prefill tok/s = prompt / cold TTFT); the same prompt again (warm TTFT: the prefix
cache); then `--decode` tokens after another prompt, end-of-sequence ignored (decode tok/s: hitrate
from the stream's token timestamps, first to last; llama.cpp from its own timings). Peak RSS is
the process's `ru_maxrss`.

`--busy-check` adds, for hitrate, decode tok/s with one other process spinning on a core
(`python -c 'while True: pass'`): the automatic thread count (`engine.cpu_threads`), 1 thread, and
every CPU (what torch does by default).

The llama.cpp peer runs in another Python (`--llama-python`, a venv of its own: it is never a
dependency of hitrate): `llama-cpp-python` (built from source, `CMAKE_BUILD_PARALLEL_LEVEL=1 pip
install llama-cpp-python`) where it imports, else `xllamacpp` (a prebuilt wheel of llama.cpp's
server). `--peer` picks one.

    .venv/bin/python benchmarks/bench_gguf_side_by_side.py \\
        --model 0.5b=/work/models/qwen2.5-coder-0.5b-instruct.gguf \\
        --model 1.5b=/work/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --llama-python /work/models/llamavenv/bin/python --threads 1 2 --rounds 2 --busy-check

A process whose RSS passes `--max-rss-gb` (default: 80% of the memory available at its start) is
stopped and its figures reported as missing, so the benchmark never pushes a shared machine into
the OOM killer.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
METRICS = ("decode_tok_s", "prefill_tok_s", "cold_ttft_s", "warm_ttft_s", "peak_rss_gb", "load_s")


# ---------------------------------------------------------------- workers (one model per process)

def prompts(vocab: int, prompt_tokens: int, seed: int) -> tuple[list[int], list[int]]:
    """(the TTFT prompt, the decode run's prompt): random ids away from the special tokens."""
    rng = random.Random(seed)
    high = min(vocab, 150000)
    return ([rng.randrange(1000, high) for _ in range(prompt_tokens)],
            [rng.randrange(1000, high) for _ in range(32)])


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def hitrate_worker(args) -> dict:
    import torch

    from hitrate.engine import cpu_threads
    from hitrate.engine.api import GenerationChunk, GenerationRequest, SamplingParams
    from hitrate.engine.load_progress import LoadProgress
    from hitrate.engine.runner import TransformersEngine

    started = time.perf_counter()
    engine = TransformersEngine.from_pretrained(args.model, threads=args.threads, dtype=args.dtype,
                                                progress=LoadProgress(sys.stderr), max_batch=args.max_batch)
    load_s = time.perf_counter() - started
    prompt, decode_prompt = prompts(engine.vocab_size, args.prompt, args.seed)

    def first_token(ids: list[int]) -> float:
        start = time.perf_counter()
        engine.generate(GenerationRequest(prompt_ids=ids, params=SamplingParams(max_tokens=1)))
        return time.perf_counter() - start

    def decode(ids: list[int]) -> float:
        stamps = []
        request = GenerationRequest(prompt_ids=ids, params=SamplingParams(max_tokens=args.decode, ignore_eos=True))
        for item in engine.stream(request):
            if isinstance(item, GenerationChunk) and item.token_ids:
                stamps.append(time.perf_counter())
        return (len(stamps) - 1) / (stamps[-1] - stamps[0])

    cold = first_token(prompt)
    warm = first_token(prompt)
    result = {"decode_tok_s": decode(decode_prompt), "prefill_tok_s": args.prompt / cold, "cold_ttft_s": cold,
              "warm_ttft_s": warm, "load_s": load_s,
              "detail": f"hitrate: matrices as {weight_kinds(engine.model)}, K/V {engine.layout.shape.dtype}, "
                        f"fast decode step {'on' if engine.fast_decoder else 'off: ' + engine.fast_decode_off_reason}, "
                        f"threads {cpu_threads.policy().describe()}; {engine.step_layouts.note()}"}
    if args.busy_check:
        result["busy"] = busy_check(engine, decode, args, cpu_threads, torch)
    result["peak_rss_gb"] = peak_rss_gb()
    return result


def weight_kinds(model) -> str:
    """The classes the model's matrices are held in (nn.Linear, the quantized modules) and their count."""
    from collections import Counter

    kinds = Counter(type(m).__name__ for m in model.modules()
                    if hasattr(m, "in_features") and hasattr(m, "out_features"))
    return ", ".join(f"{count} {name}" for name, count in kinds.most_common())


def busy_check(engine, decode, args, cpu_threads, torch) -> dict:
    """Decode tok/s with one other process spinning: automatic count, 1 thread, every CPU."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        figures = {}
        for label, threads in (("automatic", None), ("1 thread", 1), ("every CPU", cpu_threads.usable_cpus())):
            cpu_threads.configure(threads)
            time.sleep(0.8)  # the scheduler's thread ends after 0.5 s idle; the next one looks again
            rng = random.Random(len(figures) + 7)
            ids = [rng.randrange(1000, min(engine.vocab_size, 150000)) for _ in range(32)]
            rate = decode(ids)
            figures[label] = {"decode_tok_s": rate, "threads": engine.metrics()["decode_threads"]}
        return figures
    finally:
        spinner.kill()
        spinner.wait()


def llama_worker(args) -> dict:
    peer = args.peer
    if peer == "auto":
        try:
            import llama_cpp  # noqa: F401
            peer = "llama-cpp-python"
        except ImportError:
            peer = "xllamacpp"
    return llama_cpp_python_worker(args) if peer == "llama-cpp-python" else xllamacpp_worker(args)


def llama_cpp_python_worker(args) -> dict:
    import llama_cpp
    from llama_cpp import Llama

    started = time.perf_counter()
    llm = Llama(model_path=args.model, n_ctx=args.prompt + args.decode + 64, n_threads=args.threads,
                n_threads_batch=args.threads, n_batch=512, verbose=False)
    load_s = time.perf_counter() - started
    prompt, decode_prompt = prompts(llm.n_vocab(), args.prompt, args.seed)

    def first_token(ids: list[int]) -> float:
        start = time.perf_counter()
        next(iter(llm.generate(ids, temp=0.0, reset=True)))  # reuses the longest cached prefix
        return time.perf_counter() - start

    def decode(ids: list[int]) -> float:
        llm.reset()
        stamps = []
        for _token in llm.generate(ids, temp=0.0, reset=True):
            stamps.append(time.perf_counter())
            if len(stamps) == args.decode:
                break
        return (len(stamps) - 1) / (stamps[-1] - stamps[0])

    llm.reset()
    cold = first_token(prompt)
    warm = first_token(prompt)
    return {"decode_tok_s": decode(decode_prompt), "prefill_tok_s": args.prompt / cold, "cold_ttft_s": cold,
            "warm_ttft_s": warm, "load_s": load_s, "peak_rss_gb": peak_rss_gb(),
            "detail": f"llama-cpp-python {llama_cpp.__version__}, n_threads {args.threads}"}


def xllamacpp_worker(args) -> dict:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.prompt + args.decode + 64
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    started = time.perf_counter()
    server = xllamacpp.Server(params)
    load_s = time.perf_counter() - started
    prompt, decode_prompt = prompts(151000, args.prompt, args.seed)

    def complete(ids: list[int], n: int, **extra) -> dict:
        reply = server.handle_completions({"prompt": ids, "n_predict": n, "temperature": 0, "cache_prompt": True, **extra})
        if not isinstance(reply, dict) or "timings" not in reply:
            raise RuntimeError(f"llama.cpp answered {str(reply)[:300]}")
        return reply

    def first_token(ids: list[int]) -> float:
        start = time.perf_counter()
        complete(ids, 1)
        return time.perf_counter() - start

    cold = first_token(prompt)
    warm = first_token(prompt)
    timings = complete(decode_prompt, args.decode, ignore_eos=True)["timings"]
    return {"decode_tok_s": timings["predicted_per_second"], "prefill_tok_s": args.prompt / cold, "cold_ttft_s": cold,
            "warm_ttft_s": warm, "load_s": load_s, "peak_rss_gb": peak_rss_gb(),
            "detail": f"xllamacpp {getattr(xllamacpp, '__version__', '?')} (llama.cpp server, prebuilt wheel), "
                      f"n_threads {args.threads}"}


# ---------------------------------------------------------------- parent: rounds, guard, table

def available_gb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024 / 1e9
    return 8.0


def rss_gb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return 0.0


def run_worker(python: str, system: str, model: str, threads: int, args, busy_check: bool = False) -> dict | None:
    limit = args.max_rss_gb or 0.8 * available_gb()
    command = [python, str(HERE), "--worker", system, "--model-path", model, "--threads", str(threads),
               "--prompt", str(args.prompt), "--decode", str(args.decode), "--seed", str(args.seed),
               "--peer", args.peer, "--max-batch", str(args.max_batch)]
    if args.dtype:
        command += ["--dtype", args.dtype]
    if busy_check:
        command.append("--busy-check")
    log = open(args.log, "a") if args.log else subprocess.DEVNULL
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, rss_gb(proc.pid))
        if peak > limit:
            proc.kill()
            proc.wait()
            print(f"  {system} {Path(model).name} {threads}t: stopped, RSS {peak:.1f} GB over {limit:.1f} GB",
                  file=sys.stderr)
            return None
        time.sleep(0.2)
    out = proc.stdout.read()
    if proc.returncode != 0:
        print(f"  {system} {Path(model).name} {threads}t: exit {proc.returncode} (log: {args.log or 'none'})",
              file=sys.stderr)
        return None
    return json.loads(out.strip().splitlines()[-1])


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH", help="a GGUF file (repeatable)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens for TTFT and prefill")
    parser.add_argument("--decode", type=int, default=48, help="tokens generated for decode tok/s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default=None, help="hitrate's --dtype (default: the engine's)")
    parser.add_argument("--max-batch", type=int, default=8, help="hitrate's --max-batch")
    parser.add_argument("--llama-python", default=None, help="the Python of a venv with llama-cpp-python or xllamacpp")
    parser.add_argument("--peer", choices=["auto", "llama-cpp-python", "xllamacpp"], default="auto")
    parser.add_argument("--busy-check", action="store_true")
    parser.add_argument("--max-rss-gb", type=float, default=None)
    parser.add_argument("--log", default=None, help="append the workers' stderr here")
    parser.add_argument("--results", default=None,
                        help="append each process's figures here as a JSON line as it ends (a cut-short run keeps them)")
    parser.add_argument("--table-from", default=None, help="print the table of a --results file and stop")
    parser.add_argument("--worker", choices=["hitrate", "llama.cpp"], help=argparse.SUPPRESS)
    parser.add_argument("--model-path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.model, args.threads = args.model_path, args.threads[0]
        result = hitrate_worker(args) if args.worker == "hitrate" else llama_worker(args)
        print(json.dumps(result))
        return
    if not args.model:
        parser.error("name at least one --model NAME=PATH")
    models = dict(item.split("=", 1) for item in args.model)
    systems = [("hitrate", sys.executable)] + ([("llama.cpp", args.llama_python)] if args.llama_python else [])
    results: dict[tuple, list[dict]] = {}
    if args.table_from:
        for line in Path(args.table_from).read_text().splitlines():
            row = json.loads(line)
            results.setdefault((row["model"], row["threads"], row["system"]), []).append(row)
        print_table(models, args, systems, results)
        return
    print(f"load average at start: {load_average()}")
    for round_ in range(args.rounds):
        order = systems if round_ % 2 == 0 else systems[::-1]
        for name, path in models.items():
            for threads in args.threads:
                for system, python in order:
                    started = time.perf_counter()
                    # the busy check once per model: first round, most threads
                    busy = args.busy_check and system == "hitrate" and round_ == 0 and threads == max(args.threads)
                    figures = run_worker(python, system, path, threads, args, busy)
                    print(f"  round {round_ + 1} {name} {threads}t {system}: "
                          f"{'failed' if figures is None else 'done'} in {time.perf_counter() - started:.0f} s "
                          f"(load average {load_average()})", file=sys.stderr, flush=True)
                    if figures is not None:
                        results.setdefault((name, threads, system), []).append(figures)
                        if args.results:
                            row = {"model": name, "threads": threads, "system": system, "round": round_ + 1,
                                   "load_average": load_average(), **figures}
                            with open(args.results, "a") as handle:
                                handle.write(json.dumps(row) + "\n")
    print_table(models, args, systems, results)
    print(f"load average at end: {load_average()}")


def median(runs: list[dict], key: str) -> float | None:
    values = [run[key] for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else None


def print_table(models: dict, args, systems, results: dict) -> None:
    rounds = max((len(runs) for runs in results.values()), default=0)
    print(f"\nmedians over up to {rounds} rounds; prompt {args.prompt} tokens, decode {args.decode} tokens")
    header = f"{'model':<6} {'thr':>3} {'system':<10} " + " ".join(f"{m:>13}" for m in METRICS) + "  first load s"
    print(header)
    for name in models:
        for threads in args.threads:
            for system, _ in systems:
                runs = results.get((name, threads, system), [])
                cells = []
                for metric in METRICS:
                    value = median(runs, metric)
                    cells.append(f"{'-' if value is None else f'{value:.3f}':>13}")
                first = f"{runs[0]['load_s']:.1f}" if runs else "-"
                print(f"{name:<6} {threads:>3} {system:<10} " + " ".join(cells) + f"  {first}")
            ours, theirs = results.get((name, threads, "hitrate")), results.get((name, threads, "llama.cpp"))
            if ours and theirs:
                ratios = [f"{metric} {median(ours, metric) / median(theirs, metric):.2f}x"
                          for metric in ("decode_tok_s", "prefill_tok_s")]
                print(f"{'':<6} {'':>3} {'hitrate/llama.cpp':<18} " + ", ".join(ratios))
    details = {run["detail"] for runs in results.values() for run in runs}
    for detail in sorted(details):
        print(f"  {detail}")
    busy = [(key, run["busy"]) for key, runs in results.items() for run in runs if "busy" in run]
    if busy:
        print("\ndecode tok/s with one other process spinning on a core (hitrate):")
        for (name, threads, _), figures in busy:
            cells = ", ".join(f"{label} ({f['threads']} threads) {f['decode_tok_s']:.2f}" for label, f in figures.items())
            print(f"  {name} (run with --threads {threads}): {cells}")


if __name__ == "__main__":
    main()
