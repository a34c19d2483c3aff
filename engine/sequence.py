"""One request as the scheduler carries it: its prompt, where it is in prefill / decode, the row
and prefix-cache lease it holds, and the queue its consumer reads (see `engine.scheduler`)."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from hitrate.engine.api import GenerationRequest
from hitrate.engine.constraints import Constraint
from hitrate.engine.radix import Lease
from hitrate.engine.textstream import IncrementalDecoder, StopStringFilter


@dataclass
class PrefillLogits:
    """Result of a logits-only request (`TransformersEngine.prefill_logits`)."""

    logits: torch.Tensor
    cached_tokens: int


@dataclass(eq=False)
class Sequence:
    """One request inside the scheduler."""

    request: GenerationRequest
    prompt: list[int]
    started: float
    logits_only: bool = False
    constraint: Constraint | None = None
    out: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    released: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False
    acked: bool = False  # the consumer has taken PrefillStarted: prefill may start
    state: str = "waiting"  # waiting -> prefill -> decode; `released` is set at the end
    lease: Lease | None = None
    cached: int = 0  # prompt tokens served from the prefix cache
    row: int = -1
    loaded: bool = False  # the row holds prompt[:lease.matched]
    fed: list[int] = field(default_factory=list)  # tokens whose K/V is in the row
    generated: list[int] = field(default_factory=list)
    next_token: int = -1  # sampled, not yet fed
    logit_parts: list[torch.Tensor] = field(default_factory=list)
    rng: Any = None
    decoder: IncrementalDecoder | None = None
    text: StopStringFilter | None = None
    ttft: float = 0.0


def make_sequence(request: GenerationRequest, prompt: list[int], *, logits_only: bool = False) -> Sequence:
    return Sequence(request=request, prompt=prompt, started=time.perf_counter(), logits_only=logits_only)

