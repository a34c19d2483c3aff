"""Import LiteLLM's `model_prices_and_context_window.json` into a `PriceSnapshot`.

The file (MIT) is read as data: take it out of a litellm wheel or the repository; hitrate never
imports the litellm package. Its prices are USD per token; ours are per million tokens.

Field mapping:
- `input_cost_per_token`, `output_cost_per_token`, `cache_read_input_token_cost`.
- Anthropic: `cache_creation_input_token_cost` is the 5m write, `..._above_1hr` the 1h write.
- OpenAI: a non-zero `cache_creation_input_token_cost` marks a model that bills writes
  (GPT-5.6+): it is the 30m write, `..._above_12hr` the 12h write.
- `*_above_{N}k_tokens`: a long-context tier for prompts over N thousand tokens. A rate the file
  gives only at base level keeps its base value in the tier, as LiteLLM's own calculator does.
- `prompt_cache_min_tokens`, `max_input_tokens`, `deprecation_date`.
What the file lacks, the import cannot add: DeepSeek off-peak rates (the file has the peak
rate only), Gemini storage rent, price history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

from hitrate.store.prices import ModelPrice, PriceSchedule, PriceSnapshot, PriceTable, Tier

DEFAULT_PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "deepseek", "gemini")
_CHAT_MODES = {"chat", "responses"}
_PROVIDER_PREFIXES = ("deepseek/", "gemini/", "anthropic/", "openai/")
_TIER_KEY = re.compile(r"^(?P<field>.+)_above_(?P<k>\d+)k_tokens$")
_DATED = re.compile(r"^(?P<base>.+?)(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8})$")
_MECHANISM = {
    "anthropic": "anthropic_breakpoints",
    "deepseek": "deepseek_prefix_units",
    "gemini": "gemini_implicit",
}


class LiteLLMFormatError(ValueError):
    """The file is not in LiteLLM's price-map format."""


def import_litellm(
    data: Mapping[str, Any],
    *,
    as_of: date,
    source: str,
    providers: Iterable[str] = DEFAULT_PROVIDERS,
    names: Iterable[str] | None = None,
) -> PriceSnapshot:
    """Chat models of `providers` (optionally only `names`) from a parsed LiteLLM price map."""
    if not isinstance(data, Mapping) or not data:
        raise LiteLLMFormatError("expected a JSON object mapping model names to entries")
    wanted_providers = set(providers)
    wanted_names = {n.lower() for n in names} if names is not None else None
    collected: dict[str, ModelPrice] = {}
    for key, entry in data.items():
        if key == "sample_spec" or not isinstance(entry, Mapping):
            continue
        provider = entry.get("litellm_provider")
        if provider not in wanted_providers or entry.get("mode") not in _CHAT_MODES:
            continue
        name = _strip_prefix(key.lower())
        if wanted_names is not None and name not in wanted_names and key.lower() not in wanted_names:
            continue
        if name in collected:
            continue  # "deepseek/deepseek-chat" repeats "deepseek-chat"
        model = _convert(name, provider, entry, as_of=as_of, source=source)
        if model is not None:
            collected[name] = model
    if not collected:
        raise LiteLLMFormatError("no chat model of the requested providers has input and output prices")
    return PriceSnapshot(
        as_of=as_of,
        description=f"Imported from LiteLLM model_prices_and_context_window.json ({source})",
        models=_fold_dated(collected),
    )


def load_litellm_file(path: str | Path, *, as_of: date, source: str | None = None, **kwargs: Any) -> PriceTable:
    """Read a LiteLLM price-map file and return it as a `PriceTable`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LiteLLMFormatError(f"{path}: not JSON ({exc})") from exc
    return PriceTable(import_litellm(data, as_of=as_of, source=source or path.name, **kwargs))


def _strip_prefix(name: str) -> str:
    for prefix in _PROVIDER_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _per_mtok(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    # Per-token floats (2.5e-07) times 1e6 carry binary noise (0.24999999999999997).
    return round(float(value) * 1_000_000, 9)


def _convert(name: str, provider: str, entry: Mapping[str, Any], *, as_of: date, source: str) -> ModelPrice | None:
    input_rate = _per_mtok(entry.get("input_cost_per_token"))
    output_rate = _per_mtok(entry.get("output_cost_per_token"))
    if input_rate is None or output_rate is None:
        return None
    write_rate = _per_mtok(entry.get("cache_creation_input_token_cost"))
    writes_billed = provider in ("anthropic", "openai") and bool(write_rate)
    field_names = _field_names(provider, writes_billed)
    base_fields = {field: _per_mtok(entry.get(key)) for key, field in field_names.items()}

    tiers = [Tier(above_prompt_tokens=0, **base_fields)]
    for threshold, fields in sorted(_tier_fields(entry, field_names).items()):
        tiers.append(Tier(above_prompt_tokens=threshold, **{**base_fields, **fields}))

    notes = []
    if provider == "deepseek":
        notes.append("LiteLLM lists DeepSeek at the peak rate only")
    if provider == "anthropic":
        write_ttls = ["5m", "1h"] if base_fields.get("write_1h") is not None else ["5m"]
    else:
        write_ttls = [ttl for ttl, key in (("30m", "write_30m"), ("12h", "write_12h")) if base_fields.get(key) is not None]
    if provider == "openai":
        mechanism = "openai_breakpoints" if writes_billed or entry.get("supports_prompt_cache_breakpoint") else "openai_automatic_prefix"
    else:
        mechanism = _MECHANISM[provider]
    return ModelPrice(
        model=name,
        provider=provider,  # type: ignore[arg-type]
        writes_billed=writes_billed,
        write_ttls=write_ttls,  # type: ignore[arg-type]
        cache_mechanism=mechanism,  # type: ignore[arg-type]
        min_cacheable_tokens=_int_or_none(entry.get("prompt_cache_min_tokens")),
        max_input_tokens=_int_or_none(entry.get("max_input_tokens")),
        deprecation_date=_date_or_none(entry.get("deprecation_date")),
        notes="; ".join(notes),
        schedules=[
            PriceSchedule(
                as_of=as_of,
                source=source,
                note="imported from LiteLLM model_prices_and_context_window.json",
                tiers=tiers,
            )
        ],
    )


def _field_names(provider: str, writes_billed: bool) -> dict[str, str]:
    """LiteLLM rate keys -> our `Tier` fields, for one provider. Keys not listed (batch / flex /
    priority variants) are not list prices we model."""
    names = {"input_cost_per_token": "input", "output_cost_per_token": "output", "cache_read_input_token_cost": "read"}
    if provider == "anthropic":
        names["cache_creation_input_token_cost"] = "write_5m"
        names["cache_creation_input_token_cost_above_1hr"] = "write_1h"
    elif writes_billed:
        names["cache_creation_input_token_cost"] = "write_30m"
        names["cache_creation_input_token_cost_above_12hr"] = "write_12h"
    return names


def _tier_fields(entry: Mapping[str, Any], field_names: Mapping[str, str]) -> dict[int, dict[str, float | None]]:
    """`*_above_{N}k_tokens` keys grouped by threshold, mapped to our tier field names."""
    by_threshold: dict[int, dict[str, float | None]] = {}
    for key, value in entry.items():
        match = _TIER_KEY.match(key)
        if not match:
            continue
        field = field_names.get(match.group("field"))
        rate = _per_mtok(value)
        if field is None or rate is None:
            continue
        by_threshold.setdefault(int(match.group("k")) * 1000, {})[field] = rate
    return by_threshold


def _fold_dated(models: dict[str, ModelPrice]) -> list[ModelPrice]:
    """Dated ids priced exactly like their undated name become aliases of it."""
    folded: dict[str, ModelPrice] = dict(models)
    for name, model in models.items():
        match = _DATED.match(name)
        base = folded.get(match.group("base")) if match else None
        if base is None or base is model:
            continue
        same = (
            base.schedules[0].tiers == model.schedules[0].tiers
            and base.writes_billed == model.writes_billed
            and base.min_cacheable_tokens == model.min_cacheable_tokens
        )
        if same:
            folded[base.model] = base.model_copy(update={"aliases": [*base.aliases, name]})
            del folded[name]
    return sorted(folded.values(), key=lambda m: (m.provider, m.model))


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _date_or_none(value: Any) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
