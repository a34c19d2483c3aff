"""How many threads the engine's CPU work runs on: `--threads N`, or the CPUs other processes leave free.

PyTorch's default is every CPU of the process's affinity mask; llama.cpp's is the physical core
count (`cpu_get_num_math`). Both are fixed at start, and both collapse when another process keeps
a core busy: each parallel region (a decode step runs hundreds) splits its work into one equal
share per thread, and a thread whose core another process holds finishes its share a scheduler
slice late while the others wait at the region's end. Measured on a 2-core machine with one
other process busy: 2 threads 2.1-2.8 s per token of Qwen2.5-Coder-0.5B, 1 thread 7.1 tokens/s.
Letting waiting threads sleep (`OMP_WAIT_POLICY=passive`, `GOMP_SPINCOUNT=0`) does not help: the
wait is for the late share, not for a spinning waiter (and it must be set before torch loads).

So the automatic count is the CPUs this process may use (the affinity mask, capped by a cgroup
CPU quota) less those other processes kept busy since the last look: the busy time of the allowed
CPUs (`/proc/stat`) minus this process's own CPU time. A CPU counts as taken when others used it
at least `TAKEN` of the time. It is looked at again each time the engine's worker thread starts
(the scheduler's thread ends after half a second idle, so every burst of requests starts with a
fresh look); a running burst keeps its count. `--threads N` fixes the count.

torch's count is per thread (an OpenMP setting of the calling thread, which threads started later
inherit), so `apply()` runs on each thread that does engine work: the loading thread and the
scheduler's worker.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

TAKEN = 0.5  # of one CPU's time, used by other processes: that CPU is left to them
_FIRST_LOOK_S = 0.25  # the first look at the load waits this long
_MIN_WINDOW_S = 0.1  # a look this soon after the last one keeps the last count


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def cgroup_cpu_limit(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The cgroup's CPU quota in CPUs (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us`); None for none."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


def usable_cpus() -> int:
    """The affinity mask's CPUs, capped by the cgroup quota (rounded up: a 1.5-CPU quota runs 2)."""
    count = len(allowed_cpus())
    limit = cgroup_cpu_limit()
    return max(1, min(count, math.ceil(limit))) if limit else max(1, count)


@dataclass(frozen=True)
class CpuSample:
    """Busy seconds of the allowed CPUs, this process's CPU seconds, and when."""

    busy_s: float
    own_s: float
    at: float


def read_sample(cpus: list[int], stat: Path = Path("/proc/stat")) -> CpuSample | None:
    """The busy time of `cpus` (everything but idle and iowait) from `/proc/stat`; None where the
    system has no such file."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{i}" for i in cpus}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in wanted:
            values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
            busy += sum(values) - values[3] - values[4]
    return CpuSample(busy / tick, time.process_time(), time.monotonic())


def others_busy(before: CpuSample, after: CpuSample) -> float:
    """CPUs' worth of time other processes used between two samples."""
    window = after.at - before.at
    if window <= 0:
        return 0.0
    return max(0.0, (after.busy_s - before.busy_s) - (after.own_s - before.own_s)) / window


def automatic_count(usable: int, busy_elsewhere: float) -> int:
    """The CPUs left when every CPU others used at least `TAKEN` of the time is theirs."""
    return max(1, min(usable, usable - math.floor(busy_elsewhere + (1 - TAKEN))))


class ThreadPolicy:
    """The engine's thread count: fixed, or `automatic_count` from a look at the load."""

    def __init__(self, threads: int | None = None, *, sample: Callable[[], CpuSample | None] | None = None,
                 usable: Callable[[], int] = usable_cpus, sleep: Callable[[float], None] = time.sleep) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.fixed = threads
        self._usable = usable
        self._sample = sample or (lambda: read_sample(allowed_cpus()))
        self._sleep = sleep
        self._last: CpuSample | None = None
        self._lock = threading.Lock()
        self.count = threads or usable()
        self.busy_elsewhere = 0.0

    def choose(self) -> int:
        """The count for the work about to start."""
        if self.fixed is not None:
            return self.fixed
        with self._lock:
            usable = self._usable()
            now = self._sample()
            if now is None:  # no load figures on this system: every usable CPU
                self.count = usable
                return usable
            if self._last is None:
                self._sleep(_FIRST_LOOK_S)
                self._last, now = now, self._sample() or now
            if now.at - self._last.at >= _MIN_WINDOW_S:
                self.busy_elsewhere = others_busy(self._last, now)
                self.count = automatic_count(usable, self.busy_elsewhere)
                self._last = now
            return self.count

    def describe(self) -> str:
        if self.fixed is not None:
            return f"{self.fixed} (--threads)"
        return f"{self.count} (automatic: {self._usable()} usable CPUs, {self.busy_elsewhere:.1f} busy with other processes)"


_policy: ThreadPolicy | None = None  # the process's; automatic until `configure` sets one


def configure(threads: int | None) -> ThreadPolicy:
    """Set the process's policy: `threads` fixed, or None for the automatic count."""
    global _policy
    _policy = ThreadPolicy(threads)
    return _policy


def policy() -> ThreadPolicy:
    return _policy or configure(None)


def apply() -> int:
    """Run this thread's torch work (and the GEMV kernel, which reads torch's count) on the
    policy's count; returns it."""
    count = policy().choose()
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    return count
