"""Model loading runs off the main thread (so the main thread keeps no OpenMP pool that slows the
scheduler's decode steps; see engine/compute_thread.py), with its result and errors intact."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from hitrate.engine import compute_thread, cpu_threads
from hitrate.engine.api import EngineError
from hitrate.engine.runner import TransformersEngine


def test_work_runs_on_another_thread_and_its_errors_come_back():
    seen = []
    assert compute_thread.off_main_thread(lambda: seen.append(threading.current_thread().name) or 7) == 7
    assert seen == ["engine-load"]

    def fail():
        raise ValueError("bad weights")

    with pytest.raises(ValueError, match="bad weights"):
        compute_thread.off_main_thread(fail)
    # Already off the main thread: it runs right there.
    names = []
    worker = threading.Thread(target=lambda: names.append(compute_thread.off_main_thread(lambda: threading.current_thread().name)), name="w")
    worker.start()
    worker.join()
    assert names == ["w"]


def test_from_pretrained_loads_on_its_own_thread(tiny_llama_path, monkeypatch):
    threads = []
    real_init = TransformersEngine.__init__

    def spy(self, *args, **kwargs):  # the engine is built (weights packed) where the model loads
        threads.append(threading.current_thread().name)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(TransformersEngine, "__init__", spy)
    engine = TransformersEngine.from_pretrained(tiny_llama_path)
    assert threads == ["engine-load"] and engine.vocab_size > 0
    with pytest.raises(EngineError, match="could not load model"):
        TransformersEngine.from_pretrained(tiny_llama_path / "missing-folder")


# ---------------------------------------------------------------- thread counts (engine.cpu_threads)

@pytest.mark.parametrize("usable, busy, expected", [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.5, 1), (2, 1.0, 1), (2, 3.0, 1), (8, 2.6, 5), (1, 0.0, 1),
])
def test_a_cpu_other_processes_use_half_the_time_is_left_to_them(usable, busy, expected):
    assert cpu_threads.automatic_count(usable, busy) == expected


def test_the_busy_time_of_the_allowed_cpus_less_our_own(tmp_path):
    stat = tmp_path / "stat"
    tick = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal: cpu1 is outside the allowed set
    stat.write_text(f"cpu  1 1 1 1 1 1 1 1\ncpu0 {3 * tick} 0 {tick} {9 * tick} {5 * tick} 0 0 0\n"
                    f"cpu1 {100 * tick} 0 0 0 0 0 0 0\ncpu2 {tick} 0 0 0 0 0 0 {tick}\nintr 5\n")
    sample = cpu_threads.read_sample([0, 2], stat)
    assert sample.busy_s == pytest.approx(6.0)  # cpu0 user+system 4 s, cpu2 user+steal 2 s
    assert cpu_threads.read_sample([0], tmp_path / "missing") is None
    before = cpu_threads.CpuSample(busy_s=10.0, own_s=1.0, at=100.0)
    after = cpu_threads.CpuSample(busy_s=13.0, own_s=2.0, at=102.0)
    assert cpu_threads.others_busy(before, after) == pytest.approx(1.0)  # 3 busy s - 1 own s over 2 s


def test_the_cgroup_quota_caps_the_usable_cpus(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cpu_threads.cgroup_cpu_limit(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu_threads.cgroup_cpu_limit(tmp_path) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("200000")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000")
    assert cpu_threads.cgroup_cpu_limit(v1) == 2.0


class FakeLoad:
    """Samples as if other processes kept `busy` CPUs busy, on a clock the test moves."""

    def __init__(self) -> None:
        self.at, self.busy_s, self.busy = 0.0, 0.0, 0.0

    def advance(self, seconds: float) -> None:
        self.at += seconds
        self.busy_s += self.busy * seconds

    def sample(self) -> cpu_threads.CpuSample:
        return cpu_threads.CpuSample(busy_s=self.busy_s, own_s=0.0, at=self.at)


def test_the_automatic_count_follows_the_load_at_each_look():
    load = FakeLoad()
    policy = cpu_threads.ThreadPolicy(sample=load.sample, usable=lambda: 2, sleep=load.advance)
    assert policy.choose() == 2  # the first look waits for a window of its own
    load.busy = 1.0  # another process keeps one CPU busy
    load.advance(5.0)
    assert policy.choose() == 1 and "1.0 busy with other processes" in policy.describe()
    load.advance(0.01)
    assert policy.choose() == 1  # too soon to tell: the last count
    load.busy = 0.1
    load.advance(3.0)
    assert policy.choose() == 2


def test_a_fixed_count_is_kept_and_applied_on_each_thread():
    with pytest.raises(ValueError, match="at least 1"):
        cpu_threads.ThreadPolicy(0)
    fixed = cpu_threads.ThreadPolicy(1, sample=lambda: pytest.fail("a fixed count looks at no load"))
    assert fixed.choose() == 1 and fixed.describe() == "1 (--threads)"
    seen = []
    try:
        cpu_threads.configure(1)
        worker = threading.Thread(target=lambda: seen.append((cpu_threads.apply(), torch.get_num_threads())))
        worker.start()
        worker.join()
    finally:
        cpu_threads.configure(None)
    assert seen == [(1, 1)]
