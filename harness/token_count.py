"""Real token counts for the pre-flight check of a prompt's cache marks, where the backend can count.

A mark on a prefix shorter than the model's minimum cacheable length caches nothing, silently. The
projection estimates tokens as bytes / 4, which is off by tens of percent on code and non-English
text, so a head the estimate puts just above the minimum may be below it. Anthropic's Messages API
counts a request exactly (`POST /v1/messages/count_tokens`, same body as a message, returns
`input_tokens`; free of charge and not a model call, so not a ledger row); the anthropic SDK's
Vertex client serves it too. Bedrock does not (the SDK refuses), nor do OpenAI-style servers: those
keep the estimate, and say so.

The count is for the whole request; `scaled_counter` turns it into a per-section counter by scaling
the estimate, so every section (and every mark's prefix) is measured on the API's scale.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from hitrate.harness.router import Route
from hitrate.harness.wire.anthropic import render_messages_request
from hitrate.projection.canonical import estimate_tokens
from hitrate.projection.prompt import Prompt

TokenCounter = Callable[[str], int]

COUNTING_PROVIDERS = ("anthropic", "vertex")
"""Routes whose backend counts tokens (Anthropic's count_tokens, on Anthropic and on Vertex)."""


class CountUnavailable(Exception):
    """The backend cannot count this prompt; the message says why (the estimate is used)."""


def count_prompt_tokens(route: Route, prompt: Prompt) -> int:
    """The backend's exact input-token count for `prompt`, or CountUnavailable."""
    if route.spec.provider not in COUNTING_PROVIDERS:
        raise CountUnavailable(f"{route.label} cannot count tokens (only Anthropic's API and Vertex can)")
    body = render_messages_request(prompt, max_tokens=1)
    body.pop("max_tokens", None)  # count_tokens takes the message body without an output budget
    client: Any = route.backend._client  # noqa: SLF001 - the route's own SDK client (key, base URL, transport)
    try:
        counted = client.messages.count_tokens(**body)
    except Exception as exc:  # the SDK's errors and the transport's: the check falls back to the estimate
        raise CountUnavailable(f"count_tokens failed: {type(exc).__name__}: {str(exc)[:200]}") from exc
    tokens = getattr(counted, "input_tokens", None)
    if not isinstance(tokens, int) or tokens < 0:
        raise CountUnavailable(f"count_tokens answered without input_tokens ({counted!r:.200})")
    return tokens


def scaled_counter(real_total: int, estimated_total: int, base: TokenCounter = estimate_tokens) -> TokenCounter:
    """A counter on the API's scale: the estimate times real / estimated for the whole prompt."""
    ratio = real_total / estimated_total if estimated_total > 0 else 1.0

    def count(text: str) -> int:
        return int(math.ceil(base(text) * ratio)) if text else 0

    return count
