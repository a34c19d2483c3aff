"""Decode tuning kept on disk, so a second start of the same model on the same machine times nothing.

`engine.decode_tuning` times whole decode steps on every candidate weight layout at load: seconds
on a small model, most of a minute on a large one. The fastest layout depends on the weights'
shapes and dtype, the CPU, the thread count and how the candidates are built, so the key is
exactly those:

- the weights' identity: every parameter's and buffer's name, shape and dtype plus 64 of its
  values, evenly spaced (a cheap digest: no pass over gigabytes, but another model or another
  quantization of the same one differs in it);
- the CPU's model and feature flags, and the thread count the steps were timed on;
- the kernels' build: the sources of the layouts (the C kernel, the copies' builders, the fast
  step, the tuning itself), torch's version and the C compiler named by `CC`;
- the row counts tuned and the copy budget.

One JSON file per key under the user cache folder (`HITRATE_TUNING_CACHE` moves it), written to a
temporary file and renamed, so two processes starting at once each read a whole file or none. A
folder that cannot be written just means the next start times again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

import platformdirs
import torch
from torch import nn

from hitrate.engine import native_gemv

log = logging.getLogger(__name__)

ENV_CACHE = "HITRATE_TUNING_CACHE"
_SAMPLES = 64  # values read from each tensor for the weights' digest
_ENGINE = Path(__file__).parent
# The sources whose change can change a layout's speed or which layouts exist.
_BUILD_SOURCES = ("packed_gemv.c", "native_gemv.py", "cpu_linear.py", "fast_decode.py", "decode_tuning.py")


def cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("hitrate", appauthor=False)) / "decode-tuning"


def weights_digest(model: nn.Module) -> str:
    """Names, shapes, dtypes and evenly spaced values of every parameter and buffer of `model`."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
            flat = tensor.detach().reshape(-1)
            if flat.numel():
                step = max(1, flat.numel() // _SAMPLES)
                sample = flat[::step][:_SAMPLES].cpu()
                if sample.dtype.is_floating_point and sample.dtype != torch.float32:
                    sample = sample.float()
                digest.update(sample.contiguous().numpy().tobytes())
    return digest.hexdigest()


def build_identity() -> str:
    """The layouts' sources, torch's version and the compiler the kernel is built with."""
    digest = hashlib.sha256()
    for name in _BUILD_SOURCES:
        path = _ENGINE / name
        digest.update(path.read_bytes() if path.exists() else b"")
    digest.update(torch.__version__.encode())
    digest.update((os.environ.get(native_gemv.ENV_COMPILER) or "cc").encode())
    return digest.hexdigest()


class TuningCache:
    """The file of one (weights, CPU, threads, dtype, build, rows, budget) key."""

    def __init__(self, model: nn.Module, *, max_batch: int, budget_bytes: int,
                 threads: int | None = None, folder: Path | None = None) -> None:
        param = next(model.parameters())
        self.threads = torch.get_num_threads() if threads is None else threads
        parts = [
            weights_digest(model), native_gemv._cpu_identity(), f"threads={self.threads}",
            f"dtype={param.dtype}", f"device={param.device.type}", build_identity(),
            f"rows={max_batch}", f"budget={budget_bytes}",
        ]
        self.key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]
        self.path = (folder or cache_dir()) / f"{self.key}.json"

    def load(self) -> tuple[dict[int, str], dict[int, dict[str, float]]] | None:
        """(layout by row count, step ms by row count and layout) of a previous start; None when
        there is none or it cannot be read."""
        try:
            data = json.loads(self.path.read_text())
            chosen = {int(rows): str(name) for rows, name in data["chosen"].items()}
            step_ms = {int(rows): {str(k): float(v) for k, v in times.items()} for rows, times in data["step_ms"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return chosen, step_ms

    def store(self, chosen: dict[int, str], step_ms: dict[int, dict[str, float]]) -> bool:
        """Keep this start's choice; False when the folder cannot be written."""
        text = json.dumps({"chosen": chosen, "step_ms": step_ms, "threads": self.threads}, indent=1)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, partial = tempfile.mkstemp(prefix=self.key, suffix=".partial", dir=self.path.parent)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.replace(partial, self.path)
        except OSError as exc:
            log.info("decode tuning not cached (%s): the next start times again", exc)
            return False
        return True
