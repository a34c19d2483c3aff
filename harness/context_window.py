"""How many prompt tokens a route's model accepts, from the most specific source that knows.

In order:

1. the session's setting (`--context-window`, the config file's `[compaction] context_window`);
2. what the server itself reports, for servers whose window is chosen when they start: the bundled
   engine (its model's `max_context`), and OpenAI-compatible servers that list it in `GET
   /v1/models` (vLLM and SGLang: `max_model_len`; hitrate's own server: both names). Both count the
   prompt *and* the output, so the output budget of a call is set aside from it;
3. the price table's `max_input_tokens` (LiteLLM's, for cloud models).

None when no source knows: such a session never compacts on a threshold, only after the provider
refuses a prompt as too long.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hitrate.harness.router import Route

log = logging.getLogger(__name__)

SERVED_WINDOW_FIELDS = ("max_model_len", "max_context")
"""The fields of a `/v1/models` entry that carry a served model's window: vLLM's and SGLang's
`max_model_len`, and the bundled engine's own `max_context`."""

# Routes whose server chooses the window when it starts, so only the server knows it.
SELF_HOSTED_PROVIDERS = ("openai-compat", "local")


def window_of_entry(entry: dict[str, Any]) -> int | None:
    """The window a `/v1/models` entry states, if any (a positive integer)."""
    for name in SERVED_WINDOW_FIELDS:
        value = entry.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def served_context_window(base_url: str, model: str, *, api_key: str = "unused", timeout_s: float = 3.0) -> int | None:
    """The window `GET {base_url}/models` reports for `model` (or for the only model served),
    read with the OpenAI SDK; None when the server does not say, or does not answer."""
    import openai

    client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s)
    try:
        entries = [m.model_dump() for m in client.models.list()]
    except openai.OpenAIError as exc:
        log.info("%s/models did not say the context window: %s", base_url, exc)
        return None
    finally:
        client.close()
    named = [e for e in entries if e.get("id") == model]
    chosen = named or (entries if len(entries) == 1 else [])
    return window_of_entry(chosen[0]) if chosen else None


def route_served_window(route: "Route", env: dict[str, str] | None = None) -> int | None:
    """The window the route's server reports (prompt + output), for self-hosted routes only."""
    if route.spec.provider not in SELF_HOSTED_PROVIDERS:
        return None
    if route.local is not None:
        # The bundled engine's server, in this process or lent by an eval run: asked like any
        # server (its Anthropic route's base URL has no /v1).
        base = getattr(route.backend, "base_url", None)
        return served_context_window(f"{base.rstrip('/')}/v1", route.model) if base else None
    if route.spec.base_url is None:
        return None
    import os

    key = (env if env is not None else os.environ).get("OPENAI_COMPAT_API_KEY") or "unused"
    return served_context_window(route.spec.base_url, route.model, api_key=key)


def input_window(total: int, max_output_tokens: int) -> int:
    """The prompt tokens a window of `total` (prompt + output) leaves: the call's output budget set
    aside, but never more than a quarter of the window (the bundled engine lowers `max_tokens` to
    the room left; a vLLM server refuses a prompt whose `max_tokens` does not fit)."""
    return total - min(max_output_tokens, total // 4)
