"""The keep-alive warm-up request: the last request again, byte for byte, with the least output.

A cache entry lives on only if a later request carries the very same prefix, so the warm-up is
rendered from the same `Prompt` the last request was: same tools, system, docs and messages, same
cache marks with the same TTLs, same `prompt_cache_key`. Only the output budget differs, set to the
smallest each wire API accepts:

- Anthropic Messages: `max_tokens: 0` without streaming runs the prefill, reads or writes the cache
  and generates nothing (`AnthropicBackend.prewarm`); a server that refuses it gets 1 streamed token.
- OpenAI Chat Completions: 1 (`max_tokens` / `max_completion_tokens`, whichever the server reads).
- OpenAI Responses: 16, the least `max_output_tokens` the API accepts (it answers 400 below that).
"""

from __future__ import annotations

from typing import Any

from hitrate.harness.wire.types import CallResult
from hitrate.projection.prompt import Prompt

KEEPALIVE_KIND = "keepalive"
"""The ledger `kind` of a warm-up call."""

#: Output budget of a warm-up per wire API, when the backend has no way to warm without output.
WARM_OUTPUT_TOKENS: dict[str, int] = {
    "anthropic_messages": 1,
    "openai_chat": 1,
    "openai_responses": 16,
}


def _prewarm(backend: Any) -> Any:
    """The backend's generate-nothing pre-warm, when it has one that the server has not refused."""
    prewarm = getattr(backend, "prewarm", None)
    if callable(prewarm) and not getattr(backend, "prewarm_refused", False):
        return prewarm
    return None


def warm_output_tokens(backend: Any) -> int:
    """The most output tokens a warm-up through `backend` can be billed for."""
    if _prewarm(backend) is not None:
        return 0
    return WARM_OUTPUT_TOKENS.get(getattr(backend, "wire", ""), 1)


def send_warmup(backend: Any, prompt: Prompt) -> CallResult:
    """Send `prompt` again through `backend` with the smallest output it allows. Raises CallError
    like any call; the caller records it."""
    prewarm = _prewarm(backend)
    if prewarm is not None:
        return prewarm(prompt)
    return backend.call(prompt, max_tokens=warm_output_tokens(backend), on_text=None)
