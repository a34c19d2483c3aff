"""What a model load is doing, stage by stage, with sizes and seconds: for a person watching a start.

A load of minutes that prints nothing looks like a hang. The stages, in order:
- read: the weights from disk (and dequantized or unpacked as the format needs);
- pack: weight copies and kernels' layouts built for the CPU;
- check: the fast paths' logits against the model's plain forward;
- tuning: decode-step layouts timed, or read from the cache (`engine.decode_tuning`);
- ready: the whole load.

    progress = LoadProgress(sys.stderr)
    with progress.timed("read", nbytes=path.stat().st_size):
        ...
    progress.stage("tuning", seconds=3.1, detail="cached")

Whoever loads (the runner, the GGUF loader) reports through one of these; `LoadProgress()` with no
stream records the stages without printing (library use, tests). `current` is the stage under way,
which a server answering `/health` while the model loads can show.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, TextIO

STAGES = ("read", "pack", "check", "tuning", "ready")


@dataclass(frozen=True)
class Stage:
    name: str
    seconds: float
    nbytes: int | None = None
    detail: str = ""

    def line(self) -> str:
        parts = [f"load: {self.name:<6} {self.seconds:7.1f} s"]
        if self.nbytes is not None:
            parts.append(f"{format_bytes(self.nbytes)}")
        if self.detail:
            parts.append(self.detail)
        return "  ".join(parts)


def format_bytes(nbytes: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


class LoadProgress:
    """Reports load stages to `stream` (None: records them only)."""

    def __init__(self, stream: TextIO | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.stages: list[Stage] = []
        self.current: str | None = None  # the stage under way (`timed`), for /health
        self._lock = threading.Lock()

    def stage(self, name: str, *, seconds: float, nbytes: int | None = None, detail: str = "") -> Stage:
        """One stage done: kept, and printed where there is a stream."""
        done = Stage(name, seconds, nbytes, detail)
        with self._lock:
            self.stages.append(done)
            if self.stream is not None:
                print(done.line(), file=self.stream, flush=True)
        return done

    @contextmanager
    def timed(self, name: str, *, nbytes: int | None = None, detail: str = "") -> Iterator[dict]:
        """Time the body as stage `name`; the body may set `info["nbytes"]` / `info["detail"]`
        once it knows them. A stage whose body raises is not reported."""
        info: dict = {"nbytes": nbytes, "detail": detail}
        previous, self.current = self.current, name
        start = self.clock()
        try:
            yield info
        finally:
            self.current = previous
        self.stage(name, seconds=self.clock() - start, nbytes=info["nbytes"], detail=info["detail"])

    def ready(self, detail: str = "") -> Stage:
        """The load done: its whole time."""
        return self.stage("ready", seconds=self.clock() - self.started, detail=detail)

    def seconds(self, name: str) -> float:
        """Seconds spent in stages called `name` (0 when none ran)."""
        return sum(s.seconds for s in self.stages if s.name == name)
