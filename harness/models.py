"""Model specs: one syntax for choosing a backend and a model.

    anthropic/<model>                 Anthropic Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL)
    openai/<model>                    OpenAI: the Responses API for gpt-5.6 and later (it keeps reasoning
                                      across tool calls), Chat Completions for earlier models
                                      (OPENAI_API_KEY, OPENAI_BASE_URL)
    openai-chat/<model>               OpenAI Chat Completions, whatever the model
    openai-responses/<model>          OpenAI Responses API, stateless: store=false, full input every
                                      request (OPENAI_API_KEY, OPENAI_BASE_URL)
    deepseek/<model>                  DeepSeek over its OpenAI-compatible API (DEEPSEEK_API_KEY, DEEPSEEK_BASE_URL)
    gemini/<model>                    Gemini's OpenAI-compatible endpoint (GEMINI_API_KEY, GEMINI_BASE_URL)
    openrouter/<vendor>/<model>       OpenRouter's OpenAI-compatible API (OPENROUTER_API_KEY, OPENROUTER_BASE_URL)
    azure/<deployment>                Azure OpenAI v1 API (AZURE_OPENAI_API_KEY or AZURE_OPENAI_AD_TOKEN;
                                      AZURE_OPENAI_BASE_URL, or AZURE_OPENAI_ENDPOINT + /openai/v1/)
    bedrock/<model id>                Claude on Amazon Bedrock (AWS credentials or AWS_BEARER_TOKEN_BEDROCK,
                                      AWS_REGION; ANTHROPIC_BEDROCK_BASE_URL)
    vertex/<model>                    Claude on Google Vertex AI (CLOUD_ML_REGION, ANTHROPIC_VERTEX_PROJECT_ID,
                                      Google credentials or VERTEX_ACCESS_TOKEN; ANTHROPIC_VERTEX_BASE_URL)
    openai-compat/<model>@<base_url>  any OpenAI-compatible server: vLLM, SGLang, llama.cpp, hitrate serve
    local/<hub id or path>            the bundled engine, in process

Provider quirks follow the provider the user named, never a substring of the model name nor the
host a base URL points at: `openai/<model>` keeps OpenAI's semantics behind any OPENAI_BASE_URL (a
LiteLLM proxy, a corporate gateway), and a model called "deepseek-coder" served by vLLM does not
get DeepSeek's usage fields. Only `openai-compat/`, which names no provider, reads them from the
host. A gateway that differs gets a per-model override in the config file
(`hitrate.harness.model_overrides`).
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict

from hitrate.harness.model_errors import ModelSpecError  # re-exported: callers import it from here
from hitrate.harness.wire.effort import EffortDialect

WireApi = Literal["anthropic_messages", "openai_chat", "openai_responses", "local_engine"]
UsageDialect = Literal["anthropic", "openai", "deepseek", "gemini_openai", "openrouter", "openai_compat"]
CacheFamilyName = Literal["anthropic", "openai_breakpoints", "openai_implicit", "deepseek", "gemini", "openai_compat"]


class Quirks(BaseModel):
    """How one backend deviates from its wire API's reference behaviour."""

    model_config = ConfigDict(frozen=True)

    usage_dialect: UsageDialect
    """Which usage fields the backend reports and how they nest (see store.normalize)."""
    send_prompt_cache_key: bool = False
    """Only OpenAI's own API routes on `prompt_cache_key`; other servers may reject unknown fields."""
    stream_usage: bool = True
    """Whether `stream_options.include_usage` is understood (usage arrives in the last chunk)."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """OpenAI's own API rejects `max_tokens` on reasoning models and wants `max_completion_tokens`;
    self-hosted servers and DeepSeek only reliably know `max_tokens`."""
    effort_dialect: EffortDialect = "openai_compat"
    """Which request field carries `--effort`, with which values (the table in `wire.effort`)."""
    reasoning_on_tool_turns: bool = False
    """DeepSeek's thinking mode answers 400 unless every assistant turn with tool calls carries
    `reasoning_content` back, an empty one included (api-docs.deepseek.com/guides/thinking_mode,
    "Tool calls")."""
    cache_family: CacheFamilyName | None = None
    """The cache rules to plan with, when they are not the wire's and the price table's: Claude
    behind OpenRouter takes Anthropic `cache_control` marks on a Chat Completions body. None: from
    the wire and the price table (`hitrate.harness.router.rules_for`)."""
    tool_protocol: Literal["native", "text"] = "native"
    """How the agent's tools reach the model: native function calling, or text (one fenced shell
    block per reply, `harness.text_protocol`) for models whose function calling is unreliable.
    `--tool-protocol` overrides it for one run."""


class ModelSpec(BaseModel):
    """A parsed, resolved model choice."""

    model_config = ConfigDict(frozen=True)

    provider: str
    """The prefix the user wrote (one of `PROVIDERS`)."""
    model: str
    """The model name sent on the wire (or the hub id / path for local)."""
    wire: WireApi
    base_url: str | None
    api_key_env: str | None
    """Environment variable holding the key; None when the backend needs none."""
    quirks: Quirks
    region: str | None = None
    """Bedrock's AWS region or Vertex's Google Cloud region."""
    project: str | None = None
    """Vertex's Google Cloud project."""

    @property
    def label(self) -> str:
        if self.provider == "openai-compat":
            return f"openai-compat/{self.model}@{self.base_url}"
        return f"{self.provider}/{self.model}"

    def api_key(self, env: dict[str, str] | None = None) -> str | None:
        env = os.environ if env is None else env
        if self.api_key_env is None:
            return None
        key = env.get(self.api_key_env)
        if not key:
            raise ModelSpecError(
                f"{self.label} needs an API key: set {self.api_key_env} in the environment"
            )
        return key


_DEFAULT_BASE = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "deepseek": "https://api.deepseek.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai/",
    "openrouter": "https://openrouter.ai/api/v1",
}

_BASE_ENV = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "deepseek": "DEEPSEEK_BASE_URL",
    "gemini": "GEMINI_BASE_URL",
    "openrouter": "OPENROUTER_BASE_URL",
}

_KEY_ENV = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "azure": "AZURE_OPENAI_API_KEY",
}

PROVIDERS = (
    "anthropic", "openai", "openai-chat", "openai-responses", "deepseek", "gemini", "openrouter", "azure", "bedrock",
    "vertex", "openai-compat", "local",
)

RESPONSES_FROM = (5, 6)
"""From this GPT version on, `openai/<model>` uses the Responses API: on Chat Completions a
reasoning model's reasoning is dropped between tool calls (nothing in a Chat message can carry it),
while Responses returns it as an encrypted item to send back (OpenAI reasoning guide, "Keeping
reasoning items in context"). `openai-chat/<model>` keeps Chat Completions."""


def openai_default_wire(model: str) -> WireApi:
    """The wire `openai/<model>` uses: Responses for gpt-<major>.<minor> at or after RESPONSES_FROM
    (gpt-5.6, gpt-6-sol, gpt-6.1-sol, ...), Chat Completions for everything else (gpt-5.5, gpt-4.1,
    o3, fine-tunes, names this rule does not know)."""
    match = re.match(r"gpt-(\d+)(?:\.(\d+))?(?:$|-)", model.lower())
    if match is None:
        return "openai_chat"
    version = (int(match.group(1)), int(match.group(2) or 0))
    return "openai_responses" if version >= RESPONSES_FROM else "openai_chat"


OPENAI_QUIRKS = Quirks(usage_dialect="openai", send_prompt_cache_key=True, max_tokens_field="max_completion_tokens",
                       effort_dialect="openai")
"""OpenAI's own semantics: `max_completion_tokens`, `prompt_cache_key`, OpenAI's usage fields (GPT-5.6
`cache_write_tokens` included) and, on models the price table says have them, explicit breakpoints."""

_PROVIDER_QUIRKS = {
    "openai": OPENAI_QUIRKS,
    "openai-chat": OPENAI_QUIRKS,
    "openai-responses": OPENAI_QUIRKS,
    # Azure OpenAI's v1 API is OpenAI's API on Microsoft's hosts: same body fields, same usage.
    "azure": OPENAI_QUIRKS,
    # DeepSeek reports prompt_cache_hit_tokens / prompt_cache_miss_tokens, not prompt_tokens_details.
    "deepseek": Quirks(usage_dialect="deepseek", effort_dialect="deepseek", reasoning_on_tool_turns=True),
    "gemini": Quirks(usage_dialect="gemini_openai", effort_dialect="gemini"),
}
ANTHROPIC_QUIRKS = Quirks(usage_dialect="anthropic", effort_dialect="anthropic")
"""Anthropic's Messages API, on Anthropic, on Bedrock and on Vertex alike."""

MODEL_ALIASES: dict[str, str] = {
    "sonnet": "anthropic/claude-sonnet-5",
    "opus": "anthropic/claude-opus-5",
    "haiku": "anthropic/claude-haiku-5-5",
    "claude": "anthropic/claude-sonnet-5",
    "gpt": "openai/gpt-5.6",
    "gpt-mini": "openai/gpt-5.6-luna",
    "deepseek": "deepseek/deepseek-flash",
    "gemini": "gemini/gemini-3.5-flash",
}
"""Short names for current models: `--model sonnet`. The one table of them; `hitrate run --help`
lists it, and each value must be a model the shipped price snapshot prices."""


def quirks_for_openai_base_url(base_url: str) -> Quirks:
    """Usage fields and request extras for an `openai-compat/` server (which names no provider),
    from its host."""
    host = (urlparse(base_url).hostname or "").lower()
    if host == "api.openai.com":
        return OPENAI_QUIRKS
    if host.endswith("deepseek.com"):
        return _PROVIDER_QUIRKS["deepseek"]
    if host == "generativelanguage.googleapis.com":
        return _PROVIDER_QUIRKS["gemini"]
    # vLLM / SGLang / llama.cpp / hitrate serve: cached_tokens only when the server was started with
    # the reporting flag, so an absent field means unknown.
    return Quirks(usage_dialect="openai_compat")


def openrouter_quirks(model: str) -> Quirks:
    """OpenRouter: OpenAI's Chat Completions body and its own usage block (`cost`, and
    `prompt_tokens_details.cache_write_tokens` next to `cached_tokens`). OpenRouter keeps a
    conversation on the provider endpoint that cached it by itself ("provider sticky routing").
    Claude models (OpenRouter's `anthropic/` namespace, the upstream's own model id)
    cache only where the request carries Anthropic `cache_control` marks, which OpenRouter passes
    through on content parts; other upstreams cache by prefix on their own terms."""
    family = "anthropic" if model.lower().startswith("anthropic/") else None
    return Quirks(usage_dialect="openrouter", effort_dialect="openrouter", cache_family=family)


def _azure_base(env: dict[str, str]) -> str:
    base = env.get("AZURE_OPENAI_BASE_URL")
    if base:
        return base
    endpoint = env.get("AZURE_OPENAI_ENDPOINT")
    if not endpoint:
        raise ModelSpecError(
            "azure/<deployment> needs the resource's URL: set AZURE_OPENAI_ENDPOINT "
            "(https://<resource>.openai.azure.com) or AZURE_OPENAI_BASE_URL (…/openai/v1/)"
        )
    # The v1 API lives under /openai/v1/ and takes no api-version parameter.
    return endpoint.rstrip("/") + "/openai/v1/"


def _bedrock_spec(model: str, env: dict[str, str]) -> ModelSpec:
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not region:
        raise ModelSpecError(f"bedrock/{model} needs an AWS region: set AWS_REGION")
    base = env.get("ANTHROPIC_BEDROCK_BASE_URL") or f"https://bedrock-runtime.{region}.amazonaws.com"
    # Claude on Bedrock is Anthropic's Messages API (the anthropic SDK's AnthropicBedrock client):
    # Anthropic's cache_control marks, TTLs and usage fields.
    return ModelSpec(provider="bedrock", model=model, wire="anthropic_messages", base_url=base, api_key_env=None,
                     quirks=ANTHROPIC_QUIRKS, region=region)


def _vertex_spec(model: str, env: dict[str, str]) -> ModelSpec:
    region = env.get("CLOUD_ML_REGION")
    project = env.get("ANTHROPIC_VERTEX_PROJECT_ID")
    if not region or not project:
        raise ModelSpecError(f"vertex/{model} needs CLOUD_ML_REGION and ANTHROPIC_VERTEX_PROJECT_ID")
    base = env.get("ANTHROPIC_VERTEX_BASE_URL")
    if not base:
        # The anthropic SDK's own choice of host per region (AnthropicVertex).
        host = {"global": "aiplatform.googleapis.com", "us": "aiplatform.us.rep.googleapis.com",
                "eu": "aiplatform.eu.rep.googleapis.com"}.get(region, f"{region}-aiplatform.googleapis.com")
        base = f"https://{host}/v1"
    return ModelSpec(provider="vertex", model=model, wire="anthropic_messages", base_url=base, api_key_env=None,
                     quirks=ANTHROPIC_QUIRKS, region=region, project=project)


def spec_model_name(spec: str) -> str:
    """The wire model name a spec names, without what resolving it needs (a key, a region, an
    endpoint): for reading back the specs a recorded session used. ModelSpecError when the spec
    cannot be read at all."""
    try:
        return parse_model_spec(spec, env={}).model
    except ModelSpecError:
        provider, _, rest = spec.strip().partition("/")
        if provider.lower() in ("azure", "bedrock", "vertex") and rest:
            return rest  # needs an endpoint / region to resolve, not to be named
        raise


def _local_tool_protocol(path: str) -> Literal["native", "text"]:
    """A packaged small model's file (`harness.packaged_models`) gets the text tool protocol: such
    models write their calls as text rather than in their template's markup."""
    from hitrate.harness.packaged_models import packaged_tool_protocol

    return packaged_tool_protocol(path)


def parse_model_spec(spec: str, env: dict[str, str] | None = None) -> ModelSpec:
    """Parse `provider/model[...]` into a ModelSpec, honouring *_BASE_URL overrides from env."""
    env = dict(os.environ) if env is None else env
    spec = spec.strip()
    spec = MODEL_ALIASES.get(spec.lower(), spec)
    if "/" not in spec:
        close = difflib.get_close_matches(spec.lower(), list(MODEL_ALIASES), n=1)
        hint = f"; did you mean {close[0]} ({MODEL_ALIASES[close[0]]})?" if close else ""
        raise ModelSpecError(
            f"model spec {spec!r} has no provider: write provider/model, one of "
            + ", ".join(f"{p}/..." for p in PROVIDERS)
            + f", or a short name: {', '.join(MODEL_ALIASES)}{hint}"
        )
    provider, _, rest = spec.partition("/")
    provider = provider.lower()
    if not rest:
        raise ModelSpecError(f"model spec {spec!r} names no model after '{provider}/'")

    if provider == "anthropic":
        base = env.get("ANTHROPIC_BASE_URL") or _DEFAULT_BASE["anthropic"]
        return ModelSpec(
            provider=provider,
            model=rest,
            wire="anthropic_messages",
            base_url=base,
            api_key_env=_KEY_ENV["anthropic"],
            quirks=ANTHROPIC_QUIRKS,
        )
    if provider in ("openai", "openai-chat", "deepseek", "gemini"):
        account = "openai" if provider == "openai-chat" else provider
        base = env.get(_BASE_ENV[account]) or _DEFAULT_BASE[account]
        return ModelSpec(
            provider=provider,
            model=rest,
            wire=openai_default_wire(rest) if provider == "openai" else "openai_chat",
            base_url=base,
            api_key_env=_KEY_ENV[account],
            quirks=_PROVIDER_QUIRKS[provider],
        )
    if provider == "openai-responses":
        # Same account, key and base URL as openai/; only the wire API differs.
        base = env.get("OPENAI_BASE_URL") or _DEFAULT_BASE["openai"]
        return ModelSpec(
            provider=provider,
            model=rest,
            wire="openai_responses",
            base_url=base,
            api_key_env=_KEY_ENV["openai"],
            quirks=_PROVIDER_QUIRKS[provider],
        )
    if provider == "openrouter":
        if "/" not in rest:
            raise ModelSpecError(f"{spec!r}: OpenRouter names models vendor/model, e.g. openrouter/anthropic/claude-sonnet-5")
        return ModelSpec(
            provider=provider,
            model=rest,
            wire="openai_chat",
            base_url=env.get(_BASE_ENV["openrouter"]) or _DEFAULT_BASE["openrouter"],
            api_key_env=_KEY_ENV["openrouter"],
            quirks=openrouter_quirks(rest),
        )
    if provider == "azure":
        # The key is checked by the router: an Entra ID token (AZURE_OPENAI_AD_TOKEN) may stand for it.
        return ModelSpec(provider=provider, model=rest, wire="openai_chat", base_url=_azure_base(env),
                         api_key_env=None, quirks=_PROVIDER_QUIRKS["azure"])
    if provider == "bedrock":
        return _bedrock_spec(rest, env)
    if provider == "vertex":
        return _vertex_spec(rest, env)
    if provider == "openai-compat":
        model, sep, base = rest.rpartition("@")
        if not sep or not model or not base:
            raise ModelSpecError(
                f"{spec!r}: write openai-compat/<model>@<base_url>, e.g. "
                "openai-compat/qwen2.5-coder@http://127.0.0.1:8000/v1"
            )
        parsed = urlparse(base)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ModelSpecError(f"{spec!r}: base URL {base!r} is not an http(s) URL")
        return ModelSpec(
            provider=provider,
            model=model,
            wire="openai_chat",
            base_url=base,
            # Self-hosted servers usually take any key; OPENAI_COMPAT_API_KEY is used when set.
            api_key_env=None,
            quirks=quirks_for_openai_base_url(base),
        )
    if provider == "local":
        return ModelSpec(
            provider=provider,
            model=rest,
            wire="local_engine",
            base_url=None,
            api_key_env=None,
            quirks=Quirks(usage_dialect="openai_compat", tool_protocol=_local_tool_protocol(rest)),
        )
    raise ModelSpecError(
        f"unknown provider {provider!r} in {spec!r}; known providers: {', '.join(PROVIDERS)}"
    )
