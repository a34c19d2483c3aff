"""Per-model quirk overrides from the config file, for gateways that differ from the provider named.

A `[models."<spec>"]` table in config.toml (`hitrate.harness.defaults.config_path`) replaces quirks
of the route whose label is `<spec>`, exactly as written after short names are expanded:

    # A LiteLLM proxy in front of a vLLM model, reached as openai/...: generic usage, no cache key.
    [models."openai/qwen3-coder"]
    usage_dialect = "openai_compat"
    send_prompt_cache_key = false
    max_tokens_field = "max_tokens"

    # Claude behind a corporate OpenAI-compatible gateway that passes cache_control through.
    [models."openai-compat/claude-sonnet-5@https://llm.example.com/v1"]
    cache_family = "anthropic"

    # A small local model that writes its calls as text: one shell block per reply instead.
    [models."openai-compat/qwen2.5-coder-0.5b@http://127.0.0.1:8080/v1"]
    tool_protocol = "text"

Keys are the fields of `hitrate.harness.models.Quirks`; an unknown key or value is an error that
names the table, so a typo never silently does nothing.
"""

from __future__ import annotations

import os
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, ValidationError

from hitrate.harness.defaults import config_data, config_path
from hitrate.harness.models import CacheFamilyName, ModelSpec, ModelSpecError, UsageDialect


class QuirkOverride(BaseModel):
    """The quirks one `[models."<spec>"]` table may set; unset keys keep the route's own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    usage_dialect: UsageDialect | None = None
    send_prompt_cache_key: bool | None = None
    stream_usage: bool | None = None
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    cache_family: CacheFamilyName | None = None
    tool_protocol: Literal["native", "text"] | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


Overrides = Mapping[str, QuirkOverride]


def parse_overrides(data: Mapping[str, Any], where: str) -> dict[str, QuirkOverride]:
    """The `models` table of a parsed config file, validated."""
    table = data.get("models", {})
    if not isinstance(table, Mapping):
        raise ModelSpecError(f"{where}: `models` must be a table of [models.\"provider/model\"] tables")
    out: dict[str, QuirkOverride] = {}
    for label, keys in table.items():
        if not isinstance(keys, Mapping):
            raise ModelSpecError(f"{where}: [models.\"{label}\"] must be a table of quirk keys")
        try:
            out[label] = QuirkOverride.model_validate(dict(keys))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ModelSpecError(f"{where}: [models.\"{label}\"]: {problems}") from None
    return out


def load_overrides(env: Mapping[str, str] | None = None) -> dict[str, QuirkOverride]:
    """The overrides in the config file (none when it does not exist)."""
    env = dict(os.environ) if env is None else dict(env)
    return parse_overrides(config_data(env), f"config file {config_path(env)}")


def apply_override(spec: ModelSpec, overrides: Overrides) -> ModelSpec:
    """`spec` with the quirks its `[models."<label>"]` table sets."""
    override = overrides.get(spec.label)
    if override is None or not override.changes():
        return spec
    return spec.model_copy(update={"quirks": spec.quirks.model_copy(update=override.changes())})
