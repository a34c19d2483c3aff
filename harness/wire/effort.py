"""Reasoning effort: one setting (`--effort low|medium|high|max`, config key `effort`), each
backend's own request parameter for it, and a default output budget that leaves room for thinking.

The one table of the mapping. Each row is a backend's dialect (chosen by `Quirks.effort_dialect`
from the provider the user named, never from the model name); each value is what that backend
is sent for our four levels. Where a backend has no level as high as `max`, its highest is sent.

| dialect     | request field                    | low    | medium | high | max   | source |
|-------------|----------------------------------|--------|--------|------|-------|--------|
| anthropic   | `output_config.effort`           | low    | medium | high | max   | [A] |
| openai      | `reasoning_effort` (Chat) /      | low    | medium | high | xhigh | [O] |
|             | `reasoning.effort` (Responses)   |        |        |      |       |     |
| deepseek    | `reasoning_effort`               | low    | high   | high | max   | [D] |
| gemini      | `reasoning_effort`               | low    | medium | high | high  | [G] |
| openrouter  | `reasoning.effort`               | low    | medium | high | xhigh | [R] |
| openai_compat | `reasoning_effort` (vLLM, SGLang) | low | medium | high | high  | [V] |
| none        | nothing is sent                  |        |        |      |       |     |

[A] platform.claude.com/docs/en/build-with-claude/effort: `output_config: {"effort": ...}`, values
    low / medium / high (the default) / max; Claude 5-family models think adaptively by default,
    and effort bounds thinking, text and tool calls together. Manual `budget_tokens` is refused
    on the newest models, so it is never sent.
[O] OpenAI reasoning guide / API reference: `reasoning_effort` on Chat Completions and
    `reasoning: {"effort", "summary"}` on Responses; values none / minimal / low / medium / high /
    xhigh (xhigh on the newest GPT-5.x models).
[D] api-docs.deepseek.com/guides/thinking_mode: thinking is on by default at effort `high`;
    `reasoning_effort` low / high / max, and `medium` is served as `high` (their mapping table).
[G] ai.google.dev/gemini-api/docs/openai (OpenAI compatibility, "Thinking"): `reasoning_effort`
    minimal / low / medium / high maps to Gemini 3's thinking level; there is nothing above high.
[R] openrouter.ai/docs/use-cases/reasoning-tokens: `reasoning: {"effort": ...}` with
    minimal / low / medium / high / xhigh.
[V] vLLM's ChatCompletionRequest `reasoning_effort` (low / medium / high), passed to the chat
    template; servers that do not know it ignore it.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

Effort = Literal["low", "medium", "high", "max"]
EFFORTS: tuple[str, ...] = get_args(Effort)

EffortDialect = Literal["anthropic", "openai", "deepseek", "gemini", "openrouter", "openai_compat", "none"]

EFFORT_VALUES: dict[str, dict[str, str]] = {
    "anthropic": {"low": "low", "medium": "medium", "high": "high", "max": "max"},
    "openai": {"low": "low", "medium": "medium", "high": "high", "max": "xhigh"},
    "deepseek": {"low": "low", "medium": "high", "high": "high", "max": "max"},
    "gemini": {"low": "low", "medium": "medium", "high": "high", "max": "high"},
    "openrouter": {"low": "low", "medium": "medium", "high": "high", "max": "xhigh"},
    "openai_compat": {"low": "low", "medium": "medium", "high": "high", "max": "high"},
    "none": {},
}
"""What each dialect is sent for each effort level (the table above)."""


class EffortError(ValueError):
    """An effort level that does not exist; the message lists the ones that do."""


def parse_effort(value: str | None) -> Effort | None:
    """`value` as an effort level (case and spaces ignored); None stays None (the backend's default)."""
    if value is None:
        return None
    level = value.strip().lower()
    if level not in EFFORTS:
        raise EffortError(f"effort must be one of {', '.join(EFFORTS)}, not {value!r}")
    return level  # type: ignore[return-value]


def wire_effort(dialect: str, effort: Effort | None) -> str | None:
    """The value `dialect` is sent for `effort`; None when nothing is to be sent."""
    if effort is None:
        return None
    return EFFORT_VALUES.get(dialect, {}).get(effort)


def chat_effort_fields(dialect: str, effort: Effort | None) -> dict[str, Any]:
    """The Chat Completions body fields that carry `effort` on a backend of `dialect`."""
    value = wire_effort(dialect, effort)
    if value is None:
        return {}
    if dialect == "openrouter":
        return {"reasoning": {"effort": value}}
    return {"reasoning_effort": value}


# ------------------------------------------------------------------------------------------------
# Output budget
# ------------------------------------------------------------------------------------------------

THINKING_OUTPUT_TOKENS = 32_000
"""Default `max_tokens` for models that think by default: thinking counts inside the output budget
(Anthropic: "max_tokens bounds thinking plus text"; OpenAI: reasoning tokens count as output), so
4,096 cuts long edits off mid-call. Capped by the model's own output limit."""
PLAIN_OUTPUT_TOKENS = 4_096
"""Default `max_tokens` for models that do not think unless asked (and models hitrate does not know)."""


def default_output_tokens(*, thinks_by_default: bool, max_output_tokens: int | None) -> int:
    """The output budget of a call when the user set none: room for thinking on models that think
    by default, never more than the model's own limit (when it is known)."""
    budget = THINKING_OUTPUT_TOKENS if thinks_by_default else PLAIN_OUTPUT_TOKENS
    if max_output_tokens:
        budget = min(budget, max_output_tokens)
    return budget
