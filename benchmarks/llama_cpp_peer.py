"""llama.cpp (through `llama-cpp-python`) as the peer of the engine's decode benchmark.

The one real model this machine has ships as a Q4_K_M GGUF, and hitrate's engine runs it
dequantized (float32 by default). The fair peer runs the same weights at the same precision, so
the GGUF is re-quantized by llama.cpp itself (`llama_model_quantize` with `allow_requantize`) to
F32 or F16 once and kept in a cache folder; the tensors are the dequantized Q4_K_M values either
way, the same numbers transformers' `gguf_file=` loading produces.

llama-cpp-python ships no wheel for this platform: `pip install llama-cpp-python` builds llama.cpp
from source (about 15 minutes on 2 cores). It is optional; the benchmark skips the peer without it.
"""

from __future__ import annotations

import ctypes
import random
import time
from pathlib import Path
from typing import Callable

FTYPES = ("as-is", "f32", "f16")


def _quiet_llama_logs() -> None:
    """llama.cpp logs every tensor it touches to stderr; the benchmark prints a table."""
    import llama_cpp

    @llama_cpp.llama_log_callback
    def _drop(level, text, user_data):  # noqa: ANN001 - a ctypes callback
        return None

    llama_cpp.llama_log_set(_drop, ctypes.c_void_p())
    _quiet_llama_logs.keep = _drop  # type: ignore[attr-defined]  # the callback must outlive this call


def gguf_as(source: Path, ftype: str, cache: Path) -> Path:
    """`source` re-quantized by llama.cpp to `ftype` (f32, f16), built once under `cache`."""
    if ftype == "as-is":
        return source
    import llama_cpp

    codes = {"f32": llama_cpp.LLAMA_FTYPE_ALL_F32, "f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16}
    stat = source.stat()
    target = cache / f"{source.stem}-{stat.st_size}-{int(stat.st_mtime)}-{ftype}.gguf"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    _quiet_llama_logs()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = codes[ftype]
    params.allow_requantize = True
    partial = target.with_suffix(".partial")
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params))
    if status != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"llama.cpp could not convert {source} to {ftype} (status {status})")
    partial.rename(target)
    return target


def llama_cpp_decoder(path: Path, *, threads: int | None, prompt_tokens: int, decode_tokens: int, seed: int = 0) -> Callable[[], float] | None:
    """A callable timing one greedy llama.cpp decode of `decode_tokens` after a random prompt of
    `prompt_tokens` (first token to last, like the engine's figure) and returning tokens/s; None
    when llama-cpp-python is not installed."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    _quiet_llama_logs()
    llm = Llama(model_path=str(path), n_ctx=prompt_tokens + decode_tokens + 8, n_threads=threads or None, verbose=False)
    rng = random.Random(seed)
    prompt = [rng.randrange(1000, llm.n_vocab()) for _ in range(prompt_tokens)]

    def run() -> float:
        llm.reset()
        stamps: list[float] = []
        for _token in llm.generate(prompt, temp=0.0, reset=True):
            stamps.append(time.perf_counter())
            if len(stamps) == decode_tokens:
                break
        return (len(stamps) - 1) / (stamps[-1] - stamps[0])

    run.llm = llm  # type: ignore[attr-defined]  # keeps the model alive with the callable
    return run
