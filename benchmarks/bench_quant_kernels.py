"""The quantized weight kernels (`engine.quant`) on the real matrices of a GGUF file, against the
float32 `nn.Linear` on the same matrix dequantized.

For each matrix (by default Qwen2.5-Coder-1.5B Q4_K_M's Q4_K and Q6_K ones: 1536x1536, 8960x1536,
1536x8960 and the 151936x1536 head), at 1 and 2 threads and 1, 2, 4, 8 rows (decode) and a
512-row prefill: the median wall time of the quantized product with float32 activations (exact
but for summation order), with 8-bit activations (`activations="int8"`, decode rows only) and of
the float32 `nn.Linear`, taken in alternating rounds; the weight bytes each reads per second; and
float32 time / quantized time (above 1: the quantized product is faster). The load average is
printed before and after: on a shared machine wall times include other processes' turns. One
run prints everything; nothing is asserted.

    .venv/bin/python benchmarks/bench_quant_kernels.py
    .venv/bin/python benchmarks/bench_quant_kernels.py --model /work/models/qwen2.5-coder-0.5b-instruct.gguf \
        --tensors blk.0.attn_q.weight blk.0.ffn_up.weight
"""

from __future__ import annotations

import argparse
import os
import statistics
import warnings
import time
from pathlib import Path

import gguf
import torch
from torch import nn

from hitrate.engine.quant import QuantLinear, matrix, native

DEFAULT_MODEL = Path("/work/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
DEFAULT_TENSORS = ("blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight", "blk.11.ffn_down.weight",
                   "output.weight")


# wall: what a caller waits; cpu: the process's CPU seconds, which leave out other processes' turns
# on a busy machine (at one thread, the kernel's own work; with more, idle team threads' spinning
# counts too).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def median_seconds(run, budget_s: float, most: int = 50) -> float:
    run()  # warm: page in the weights, build caches
    times: list[float] = []
    spent = 0.0
    while len(times) < 3 or (spent < budget_s and len(times) < most):
        start = clock()
        run()
        times.append(clock() - start)
        spent += times[-1]
    return statistics.median(times)


def compare(systems: dict[str, nn.Module], rows: int, in_features: int, budget_s: float) -> dict[str, float]:
    """Median seconds of each system on the same input, taken in alternating rounds so a load that
    comes and goes touches all of them."""
    x = torch.randn(rows, in_features)
    rounds = 3 if rows <= 8 else 1
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(rounds):
        for name, system in systems.items():
            times[name].append(median_seconds(lambda: system(x), budget_s / rounds, most=50 if rows <= 8 else 3))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--tensors", nargs="+", default=list(DEFAULT_TENSORS))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--rows", nargs="+", type=int, default=[1, 2, 4, 8, 512])
    parser.add_argument("--budget", type=float, default=0.6, help="seconds of timing per product and size")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    reason = native.unavailable_reason()
    print(f"kernels: {'built' if reason is None else 'unavailable: ' + reason}; torch {torch.__version__}")
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")  # the map is read only
    reader = gguf.GGUFReader(args.model)
    by_name = {t.name: t for t in reader.tensors}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.clock} clock")
    print(f"{'matrix':<24} {'type':<5} {'[out x in]':>14} {'thr':>3} {'rows':>4} {'quant ms':>9} {'GB/s':>6} "
          f"{'int8 ms':>8} {'GB/s':>6} {'f32 ms':>9} {'GB/s':>6} {'f32/quant':>9} {'f32/int8':>8}")
    for name in args.tensors:
        tensor = by_name[name]
        in_features, out_features = (int(n) for n in tensor.shape)
        blocks = torch.from_numpy(tensor.data)  # the memory map, not a copy
        quant = QuantLinear(tensor.tensor_type, blocks, out_features, in_features)
        int8 = QuantLinear(tensor.tensor_type, blocks, out_features, in_features, activations="int8")
        dense = nn.Linear(in_features, out_features, bias=False)
        with torch.no_grad():
            dense.weight.copy_(quant.dequantize())
        quant_bytes, dense_bytes = quant.weight_nbytes, dense.weight.numel() * 4
        shape = f"{out_features}x{in_features}"
        with torch.inference_mode():
            for threads in args.threads:
                torch.set_num_threads(threads)
                for rows in args.rows:
                    systems = {"quant": quant, "f32": dense}
                    if rows <= matrix.DECODE_ROWS and int8.matrix.int8_activations:
                        systems["int8"] = int8
                    t = compare(systems, rows, in_features, args.budget * (3 if rows > 8 else 1))
                    i8 = (f"{t['int8'] * 1e3:>8.3f} {quant_bytes / t['int8'] / 1e9:>6.1f}" if "int8" in t
                          else f"{'-':>8} {'-':>6}")
                    ratio8 = f"{t['f32'] / t['int8']:>8.2f}" if "int8" in t else f"{'-':>8}"
                    print(f"{name:<24} {tensor.tensor_type.name:<5} {shape:>14} {threads:>3} {rows:>4} "
                          f"{t['quant'] * 1e3:>9.3f} {quant_bytes / t['quant'] / 1e9:>6.1f} {i8} "
                          f"{t['f32'] * 1e3:>9.3f} {dense_bytes / t['f32'] / 1e9:>6.1f} {t['f32'] / t['quant']:>9.2f} "
                          f"{ratio8}", flush=True)
        del dense
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
