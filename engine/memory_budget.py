"""Whether a model's weights, its K/V pool and its weight copies fit the memory this process may use.

Checked before allocating, so that a load too large for the machine stops with a message naming
the option to lower instead of being OOM-killed halfway through. Available memory is the
smaller of the kernel's estimate (`MemAvailable` in /proc/meminfo: free memory plus what can be
reclaimed without swapping) and what a cgroup (a container's limit) still allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hitrate.engine.api import EngineError

_MEMINFO = Path("/proc/meminfo")
_CGROUP_V2 = Path("/sys/fs/cgroup")
_CGROUP_V1 = Path("/sys/fs/cgroup/memory")
# Activations, the batch buffer, allocator slack and the interpreter itself: not counted item by
# item, so a plan must leave this much over.
HEADROOM_BYTES = 512 << 20


class MemoryBudgetError(EngineError):
    """The plan does not fit; the message says what to lower."""


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes each part will take once loaded."""

    weights: int  # as they sit in memory (quantized blocks, float tensors)
    pool: int  # the K/V pool (prefix cache)
    copies: int = 0  # weight copies in other layouts, at most the decode-copy budget
    dequantized: bool = False  # a GGUF file's weights dequantized to floats (not as shipped)

    @property
    def total(self) -> int:
        return self.weights + self.pool + self.copies + HEADROOM_BYTES


def available_bytes() -> int | None:
    """Memory this process can still take, or None where the system does not say."""
    candidates = [v for v in (_meminfo_available(), _cgroup_room()) if v is not None]
    return min(candidates) if candidates else None


def check(plan: MemoryPlan, available: int | None = None) -> None:
    """Raise `MemoryBudgetError` when `plan` needs more than `available` (default: measured now)."""
    available = available_bytes() if available is None else available
    if available is None or plan.total <= available:
        return
    hints = []
    if plan.pool:
        hints.append(f"--pool-tokens (the K/V pool takes {_gib(plan.pool)})")
    if plan.copies:
        hints.append(f"--copy-budget (MiB of weight copies for batched decode, up to {_gib(plan.copies)} now; 0 for none)")
    hints.append("--max-batch (rows of the batch buffer)")
    raise MemoryBudgetError(
        f"not enough memory: the weights take {_gib(plan.weights)}, the K/V pool {_gib(plan.pool)}"
        + (f", weight copies up to {_gib(plan.copies)}" if plan.copies else "")
        + f": {_gib(plan.total)} with {_gib(HEADROOM_BYTES)} of headroom, but only "
        f"{_gib(available)} is available; lower " + ", ".join(hints)
        + (", or keep the GGUF file's weights as shipped (--dtype gguf)" if plan.dequantized else "")
    )


def kv_bytes_per_token(config, dtype) -> int:
    """K and V of every layer for one token, from a transformers config (before any model exists)."""
    import torch

    heads = int(config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    return 2 * int(config.num_hidden_layers) * kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def _meminfo_available() -> int | None:
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """The cgroup's limit minus its usage, where a limit is set (v2, then v1)."""
    for limit_file, usage_file in ((_CGROUP_V2 / "memory.max", _CGROUP_V2 / "memory.current"),
                                   (_CGROUP_V1 / "memory.limit_in_bytes", _CGROUP_V1 / "memory.usage_in_bytes")):
        try:
            limit_text = limit_file.read_text().strip()
            if limit_text == "max" or int(limit_text) >= 1 << 60:  # no limit
                return None
            return max(0, int(limit_text) - int(usage_file.read_text().strip()))
        except (OSError, ValueError):
            continue
    return None
