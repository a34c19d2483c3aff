"""The quantized weight kernels (`engine.quant`) on the real matrices of a GGUF file, against the
float32 `nn.Linear` on the same matrix dequantized.

For each matrix (by default Qwen2.5-Coder-1.5B Q4_K_M's Q4_K and Q6_K ones: 1536x1536, 8960x1536,
1536x8960 and the 151936x1536 head), at 1 and 2 threads and 1, 2, 4, 8 rows (decode) and a
512-row prefill: the median time of the quantized product and of the float32 one, taken in
alternation, the weight bytes each reads per second, and float32 time / quantized time (above 1:
the quantized product is faster). One run prints everything; nothing is asserted.

    .venv/bin/python benchmarks/bench_quant_kernels.py
    .venv/bin/python benchmarks/bench_quant_kernels.py --model /work/models/qwen2.5-coder-0.5b-instruct.gguf \
        --tensors blk.0.attn_q.weight blk.0.ffn_up.weight
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gguf
import torch
from torch import nn

from hitrate.engine.quant import QuantLinear, native

DEFAULT_MODEL = Path("/work/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
DEFAULT_TENSORS = ("blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight", "blk.11.ffn_down.weight",
                   "output.weight")


def median_seconds(run, budget_s: float, most: int = 50) -> float:
    run()  # warm: page in the weights, build caches
    times: list[float] = []
    spent = 0.0
    while len(times) < 3 or (spent < budget_s and len(times) < most):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return statistics.median(times)


def compare(quant: QuantLinear, dense: nn.Linear, rows: int, budget_s: float) -> tuple[float, float]:
    """Medians of the two products on the same input, taken in alternating rounds so a load that
    comes and goes touches both."""
    x = torch.randn(rows, quant.in_features)
    quant_times, dense_times = [], []
    for _ in range(3):
        quant_times.append(median_seconds(lambda: quant(x), budget_s / 3))
        dense_times.append(median_seconds(lambda: dense(x), budget_s / 3))
    return statistics.median(quant_times), statistics.median(dense_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--tensors", nargs="+", default=list(DEFAULT_TENSORS))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--rows", nargs="+", type=int, default=[1, 2, 4, 8, 512])
    parser.add_argument("--budget", type=float, default=0.6, help="seconds of timing per product and size")
    args = parser.parse_args()
    reason = native.unavailable_reason()
    print(f"kernels: {'built' if reason is None else 'unavailable: ' + reason}; torch {torch.__version__}")
    reader = gguf.GGUFReader(args.model)
    by_name = {t.name: t for t in reader.tensors}
    print(f"{'matrix':<24} {'type':<5} {'[out x in]':>14} {'thr':>3} {'rows':>4} {'quant ms':>9} {'GB/s':>6} "
          f"{'f32 ms':>9} {'GB/s':>6} {'f32/quant':>9}")
    for name in args.tensors:
        tensor = by_name[name]
        in_features, out_features = (int(n) for n in tensor.shape)
        blocks = torch.from_numpy(tensor.data)  # the memory map, not a copy
        quant = QuantLinear(tensor.tensor_type, blocks, out_features, in_features)
        dense = nn.Linear(in_features, out_features, bias=False)
        with torch.no_grad():
            dense.weight.copy_(quant.dequantize())
        quant_bytes, dense_bytes = quant.weight_nbytes, dense.weight.numel() * 4
        shape = f"{out_features}x{in_features}"
        with torch.inference_mode():
            for threads in args.threads:
                torch.set_num_threads(threads)
                for rows in args.rows:
                    budget = args.budget * (3 if rows >= 64 else 1)
                    q, d = compare(quant, dense, rows, budget)
                    print(f"{name:<24} {tensor.tensor_type.name:<5} {shape:>14} {threads:>3} {rows:>4} {q * 1e3:>9.3f} "
                          f"{quant_bytes / q / 1e9:>6.1f} {d * 1e3:>9.3f} {dense_bytes / d / 1e9:>6.1f} {d / q:>9.2f}",
                          flush=True)
        del dense


if __name__ == "__main__":
    main()
