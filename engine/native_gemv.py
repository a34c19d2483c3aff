"""The packed decode kernel of `packed_gemv.c`, compiled at load with the machine's C compiler.

Why a kernel of our own and not only the BLAS libraries torch ships: a decode step multiplies
one to eight rows by every weight matrix, which is bound by how fast the weights stream from
memory, and neither MKL nor oneDNN streams them at that rate for so few rows. Measured on an AMD
EPYC (Zen 4) machine, two cores (a plain read of 671 MB: 32-40 GB/s), the products of one
Gemma 3 270M float32 decode step (72 layer matrices and the 262k x 640 head) at one row: oneDNN
18.0 ms for the layers and 28.2 ms for the head (22-24 GB/s), MKL on row-major weights 35 and
66 ms, this kernel 12.4 and 20.0 ms (32-33 GB/s); at 8 rows oneDNN 19.7 + 27.5 ms, this kernel
14.2 + 22.3. llama.cpp ships its own CPU kernels for the same reason.

It is built for float32 weights and for bfloat16 ones (half the bytes to stream; `--dtype
bfloat16`): with AVX512-BF16 each lane takes a pair of inputs per instruction (`vdpbf16ps`; on
Gemma 3's matrices 20.3 ms against 24.8 widening at 2 rows, 24.3 against 35.0 at 8, the same
12.8 at one row), elsewhere the weights are widened to float32 as they load. Either build is one
more candidate of `engine.decode_tuning`, timed against the others at load, so a machine where
it is slower does not use it. Where there is no C compiler (or it cannot build OpenMP code, as
Apple's clang) it is not a candidate and `unavailable_reason()` says why. The built library is
cached by a hash of the source, the compiler and the CPU, so a load after the first takes no
compile.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs
import torch

SOURCE = Path(__file__).with_name("packed_gemv.c")
# -march=native: the library is built for the machine it runs on (AVX-512 where there is).
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
ENV_COMPILER = "CC"
ENV_CACHE = "HITRATE_KERNEL_CACHE"
_COMPILE_TIMEOUT_S = 120


# The weight dtypes the kernel is built for, and the flags that select each build.
WEIGHT_DTYPES = {torch.float32: (), torch.bfloat16: ("-DWEIGHTS_BF16",)}


@dataclass(frozen=True)
class Kernel:
    """The loaded library, its packed layout (`lanes` outputs side by side, `depth` inputs per
    lane and step: 2 where AVX512-BF16 takes bfloat16 pairs) and the dtype of the weights it reads."""

    lib: ctypes.CDLL
    lanes: int
    dtype: torch.dtype = torch.float32
    depth: int = 1


class KernelUnavailable(Exception):
    """The kernel could not be built or loaded on this machine; the message says why."""


def load(dtype: torch.dtype = torch.float32) -> Kernel | None:
    """The kernel for weights of `dtype`, built on first use; None when it cannot be
    (`unavailable_reason` says why)."""
    try:
        return _load(dtype)
    except KernelUnavailable:
        return None


def unavailable_reason(dtype: torch.dtype = torch.float32) -> str | None:
    """Why `load(dtype)` returns None; None when the kernel is available."""
    try:
        _load(dtype)
    except KernelUnavailable as exc:
        return str(exc)
    return None


@functools.cache
def _load(dtype: torch.dtype) -> Kernel:
    if dtype not in WEIGHT_DTYPES:
        raise KernelUnavailable(f"no build for {dtype} weights (only {', '.join(map(str, WEIGHT_DTYPES))})")
    library = build_library(SOURCE, FLAGS + WEIGHT_DTYPES[dtype], f"packed_gemv-{str(dtype).removeprefix('torch.')}")
    return open_library(library, dtype)


def build_library(source: Path, flags: tuple[str, ...], stem: str) -> Path:
    """The shared library built from `source` with `flags` by the machine's C compiler, compiled
    on first use into the kernel cache (`<stem>-<key>.so`) and reused after; `KernelUnavailable`
    says why it cannot be built. Other native kernels of the engine are built through it too."""
    compiler = shutil.which(os.environ.get(ENV_COMPILER) or "cc")
    if compiler is None:
        raise KernelUnavailable(f"no C compiler ({os.environ.get(ENV_COMPILER) or 'cc'} is not on PATH)")
    library = _cache_dir() / f"{stem}-{_build_key(compiler, flags, source)}.so"
    if not library.exists():
        _compile(compiler, library, flags, source)
    return library


def open_library(library: Path, dtype: torch.dtype = torch.float32) -> Kernel:
    """Load a built kernel. torch is imported (this module imports it), so its OpenMP runtime is
    loaded: the library's `libgomp.so.1` resolves to it and both share one thread team."""
    try:
        lib = ctypes.CDLL(str(library))
    except OSError as exc:
        raise KernelUnavailable(f"the built kernel does not load ({exc})") from exc
    pointer, integer = ctypes.c_void_p, ctypes.c_int
    lib.hitrate_gemv.argtypes = [pointer, pointer, pointer, pointer, integer, integer, integer, integer, pointer]
    lib.hitrate_gemv.restype = None
    lib.hitrate_gemv_lanes.restype = integer
    lib.hitrate_gemv_depth.restype = integer
    return Kernel(lib, int(lib.hitrate_gemv_lanes()), dtype, int(lib.hitrate_gemv_depth()))


def _cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("hitrate", appauthor=False)) / "kernels"


def _build_key(compiler: str, flags: tuple[str, ...], source: Path = SOURCE) -> str:
    """Source, flags, compiler and CPU: a library built for another CPU (-march=native) or by
    another compiler is not reused."""
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise KernelUnavailable(f"the C compiler {compiler} does not run ({exc})") from exc
    digest = hashlib.sha256()
    for part in (source.read_bytes(), " ".join(flags).encode(), compiler.encode(), version.encode(),
                 platform.machine().encode(), _cpu_identity().encode(), torch.__version__.encode()):
        digest.update(part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _cpu_identity() -> str:
    """The CPU's model and feature flags where the system lists them (Linux), else its name."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor()
    wanted = ("model name", "flags", "Features", "CPU part")
    return "\n".join(sorted({line for line in text.splitlines() if line.split(":")[0].strip() in wanted}))


def _compile(compiler: str, library: Path, flags: tuple[str, ...] = FLAGS, source: Path = SOURCE) -> None:
    """Build into a temporary file, then rename: a load never sees a half-written library, and two
    processes building at once both end with a whole one."""
    try:
        library.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=library.stem, suffix=".so.partial", dir=library.parent)
    except OSError as exc:  # a read-only or full cache folder: set HITRATE_KERNEL_CACHE elsewhere
        raise KernelUnavailable(f"cannot write the kernel to {library.parent} ({exc.strerror or exc})") from exc
    os.close(fd)
    try:
        try:
            done = subprocess.run([compiler, *flags, str(source), "-o", partial], capture_output=True,
                                  text=True, timeout=_COMPILE_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            raise KernelUnavailable(f"{compiler} failed to run ({exc})") from exc
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise KernelUnavailable(f"{compiler} could not build the kernel: {detail[0] if detail else done.returncode}")
        os.replace(partial, library)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def pack(weight: torch.Tensor, kernel: Kernel) -> torch.Tensor:
    """`weight` `[out, in]` in `kernel`'s layout `[blocks, steps, lanes, depth]`: for each block of
    `lanes` outputs, each step's `depth` inputs side by side (outputs and inputs past the matrix
    zero), in the weight's dtype."""
    out, inner = weight.shape
    blocks, steps = -(-out // kernel.lanes), -(-inner // kernel.depth)
    with torch.no_grad():
        padded = torch.zeros(blocks * kernel.lanes, steps * kernel.depth, dtype=weight.dtype)
        padded[:out, :inner] = weight.detach()
        return padded.view(blocks, kernel.lanes, steps, kernel.depth).permute(0, 2, 1, 3).contiguous()


def packed_nbytes(weight: torch.Tensor, kernel: Kernel) -> int:
    """The bytes of `pack(weight, kernel)`."""
    out, inner = weight.shape
    return -(-out // kernel.lanes) * kernel.lanes * -(-inner // kernel.depth) * kernel.depth * weight.element_size()


class PackedProduct:
    """`x -> x @ weight.T + bias` for a 2-D `x` of any number of rows, on `packed` (`pack(weight)`,
    which tied weights share), in `x`'s dtype (float32 or bfloat16; the kernel computes in
    float32)."""

    __slots__ = ("_run", "_pairs", "packed", "bias", "in_features", "out_features")

    def __init__(self, kernel: Kernel, packed: torch.Tensor, in_features: int, out_features: int,
                 bias: torch.Tensor | None) -> None:
        if packed.dtype != kernel.dtype:
            raise ValueError(f"weights packed as {packed.dtype} for a kernel built for {kernel.dtype}")
        self._run = kernel.lib.hitrate_gemv
        self._pairs = kernel.depth > 1  # the kernel converts even one row into scratch
        self.packed = packed
        self.in_features, self.out_features = in_features, out_features
        self.bias = None if bias is None else bias.detach().float().contiguous()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in WEIGHT_DTYPES or x.dim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"expected float32 or bfloat16 [rows, {self.in_features}], got {x.dtype} {tuple(x.shape)}")
        dtype = x.dtype
        x = x.float().contiguous()  # bfloat16 rows widen exactly
        rows = x.shape[0]
        y = torch.empty(rows, self.out_features)
        # The kernel's rows, transposed or paired; one float32 row is read where it is.
        scratch = torch.empty(rows * (self.in_features + 1)) if rows > 1 or self._pairs else x
        self._run(x.data_ptr(), self.packed.data_ptr(), None if self.bias is None else self.bias.data_ptr(),
                  y.data_ptr(), rows, self.in_features, self.out_features, torch.get_num_threads(),
                  scratch.data_ptr())
        return y if dtype == torch.float32 else y.to(dtype)
