"""Next-token choice from the last position's logits: greedy, temperature and nucleus (top-p)."""

from __future__ import annotations

import torch

from hitrate.engine.api import EngineError, SamplingParams


def validate_params(params: SamplingParams) -> None:
    if params.max_tokens < 1:
        raise EngineError(f"max_tokens must be at least 1, got {params.max_tokens}")
    if not params.temperature >= 0:
        raise EngineError(f"temperature must be >= 0, got {params.temperature}")
    if not 0 < params.top_p <= 1:
        raise EngineError(f"top_p must be in (0, 1], got {params.top_p}")
    if any(not isinstance(s, str) for s in params.stop):
        raise EngineError("stop must be a list of strings")


def make_generator(params: SamplingParams, device: torch.device) -> torch.Generator | None:
    """A private RNG when the request asks for reproducible sampling."""
    if params.seed is None or params.temperature == 0:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(params.seed)
    return generator


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """Index of the largest logit along the last dimension (the first one on ties, as `argmax`).
    `max(...).indices` rather than `argmax`: on CPU, argmax over a 262k-entry vocabulary (Gemma 3)
    takes about 1 ms against 0.1 ms, a step's worth of Python overhead on every decoded token."""
    return logits.max(-1).indices


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None = None) -> int:
    """Pick the next token id from a `[vocab]` logits vector."""
    if params.temperature == 0:
        return int(greedy(logits))
    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    if params.top_p < 1:
        sorted_probs, order = torch.sort(probs, descending=True)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        # Keep the smallest set whose mass reaches top_p: drop a token when the mass before it
        # already reaches top_p (the first token is always kept).
        drop = (cumulative - sorted_probs) >= params.top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        choice = torch.multinomial(sorted_probs, 1, generator=generator)
        return int(order[choice])
    return int(torch.multinomial(probs, 1, generator=generator))
