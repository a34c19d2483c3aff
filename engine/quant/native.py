"""The quantized kernels of `kernels.c`, built at load like the packed GEMV (`engine.native_gemv`)."""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import native_gemv
from .formats import QuantType

SOURCE = Path(__file__).with_name("kernels.c")
# Float rows (F32, F16, BF16) go through the kernels this many values at a time; a row of another
# length takes the reference path.
FLOAT_RUN = 32


@dataclass(frozen=True)
class QuantKernels:
    """The loaded library: `gemv` for a few rows, `dequantize_rows` for tiles and lookups."""

    lib: ctypes.CDLL

    def gemv(self, qtype: QuantType, blocks: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None,
             y: torch.Tensor) -> None:
        rows, inner = x.shape
        status = self.lib.hitrate_quant_gemv(int(qtype), blocks.data_ptr(), blocks.shape[1], x.data_ptr(),
                                             None if bias is None else bias.data_ptr(), y.data_ptr(), rows,
                                             inner, y.shape[1], torch.get_num_threads())
        if status != 0:
            raise ValueError(f"the quantized GEMV has no kernel for {qtype.name}")

    def supports_int8(self, qtype: QuantType) -> bool:
        """Whether `gemv_int8` takes `qtype` (Q4_0, Q5_0, Q8_0, Q4_K, Q6_K where AVX2 is)."""
        return bool(self.lib.hitrate_quant_int8_supports(int(qtype)))

    def gemv_int8(self, qtype: QuantType, blocks: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None,
                  y: torch.Tensor) -> None:
        """`gemv` with the rows of `x` quantized to 8-bit blocks first (ggml's CPU arithmetic)."""
        rows, inner = x.shape
        scratch = torch.empty(rows * (inner + inner // 4) + 64, dtype=torch.uint8)
        status = self.lib.hitrate_quant_gemv_int8(int(qtype), blocks.data_ptr(), blocks.shape[1], x.data_ptr(),
                                                  None if bias is None else bias.data_ptr(), y.data_ptr(), rows,
                                                  inner, y.shape[1], torch.get_num_threads(), scratch.data_ptr())
        if status != 0:
            raise ValueError(f"the 8-bit activation GEMV has no kernel for {qtype.name} rows of {inner}")

    def dequantize_rows(self, qtype: QuantType, blocks: torch.Tensor, out: torch.Tensor,
                        ids: torch.Tensor | None = None) -> None:
        """Rows of `blocks` (all of them, or those at `ids`) into float32 `out` `[n, in]`."""
        status = self.lib.hitrate_quant_dequantize(int(qtype), blocks.data_ptr(), blocks.shape[1],
                                                   None if ids is None else ids.data_ptr(), out.shape[0],
                                                   out.shape[1], out.data_ptr(), torch.get_num_threads())
        if status != 0:
            raise ValueError(f"the quantized kernels cannot dequantize {qtype.name}")


# -march=native: built for the machine it runs on; the portable build is tested with -march=x86-64.
FLAGS = native_gemv.FLAGS


def load() -> QuantKernels | None:
    """The kernels, built on first use; None where they cannot be (`unavailable_reason` says why)."""
    try:
        return _load()
    except native_gemv.KernelUnavailable:
        return None


def unavailable_reason() -> str | None:
    try:
        _load()
    except native_gemv.KernelUnavailable as exc:
        return str(exc)
    return None


@functools.cache
def _load() -> QuantKernels:
    return open_library(native_gemv.build_library(SOURCE, FLAGS, "quant_kernels"))


def open_library(library: Path) -> QuantKernels:
    """Load a built library; it shares torch's OpenMP runtime (see `native_gemv.open_library`)."""
    try:
        lib = ctypes.CDLL(str(library))
    except OSError as exc:
        raise native_gemv.KernelUnavailable(f"the built quantized kernels do not load ({exc})") from exc
    pointer, integer, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    lib.hitrate_quant_gemv.argtypes = [integer, pointer, size, pointer, pointer, pointer, integer, integer, integer,
                                       integer]
    lib.hitrate_quant_gemv.restype = integer
    lib.hitrate_quant_dequantize.argtypes = [integer, pointer, size, pointer, integer, integer, pointer, integer]
    lib.hitrate_quant_dequantize.restype = integer
    lib.hitrate_quant_gemv_int8.argtypes = [integer, pointer, size, pointer, pointer, pointer, integer, integer,
                                            integer, integer, pointer]
    lib.hitrate_quant_gemv_int8.restype = integer
    lib.hitrate_quant_int8_supports.argtypes = [integer]
    lib.hitrate_quant_int8_supports.restype = integer
    return QuantKernels(lib)
