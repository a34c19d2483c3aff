"""Model work off the main thread: loading a model where its OpenMP threads can be let go.

GNU OpenMP keeps a pool of worker threads for every thread that has run a parallel region, for
as long as that thread lives. When the pools of all threads together hold more threads than
there are CPUs, every pool waits for work with a very short spin (its "throttled" mode) and
sleeps, so each parallel region pays a wake-up: on a 2-CPU machine the engine's decode steps
(hundreds of small matmuls, each a region) ran 1.5x slower on the scheduler's thread than the
same forward on the main thread, whenever the main thread had loaded the model (measured on
Gemma 3 270M: decoder layers 38 ms against 26 ms per step; a bare 1x640 by 640x2048 matmul
0.21 ms against 0.08 ms).

The main thread's pool lives as long as the process, but a short-lived thread's pool goes with
it: loading in one leaves the scheduler's thread the only one with a pool.
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


def off_main_thread(work: Callable[[], T], name: str = "engine-load") -> T:
    """`work()` run on a thread of its own, joined; its result, or its exception re-raised here."""
    if threading.current_thread() is not threading.main_thread():
        return work()  # already off the main thread: nothing to keep clean
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
