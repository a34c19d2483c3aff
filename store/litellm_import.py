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
- `off_peak_pricing` (litellm >= 1.110: DeepSeek): the off-peak rates replace the base rates they
  name (a rate it leaves out keeps the base value, as LiteLLM's calculator does), and its
  `windows` / `hours_utc` become our peak hours (their complement), when the off-peak time is the
  same every weekday and weekends are either all off-peak or like weekdays. Other shapes keep the
  base (peak) rates only, noted on the model.
- Anthropic `provider_specific_entry`: `us` is the `inference_geo: "us"` multiplier, `fast` the
  `speed: "fast"` multiplier.
- Anthropic `search_context_cost_per_query`: the per-request web search fee (Anthropic has one
  price whatever the context size; differing sizes are not mapped).
- `*_batches`, `*_priority`, `*_flex` (long-context `*_above_{N}k_tokens_<tier>` included): the
  rates of the "batch", "priority" and "flex" service tiers, chosen by the `service_tier` a usage
  reports. A rate the file does not give for a service tier stays unknown there (no guessing from
  the standard rate).
Not mapped: `_ultrafast` and `_decisions` variants (no usage field names them) and audio / image
rates. What the file lacks, the import cannot add: Gemini storage rent, price history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

from hitrate.store.prices import (
    ModelPrice,
    PeakHours,
    PriceModifier,
    PriceSchedule,
    PriceSnapshot,
    PriceTable,
    RequestFee,
    Tier,
)

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

    service_tiers = {
        name: levels for suffix, name in _SERVICE_TIERS.items() if (levels := _service_tier_levels(entry, field_names, suffix))
    }
    notes = []
    tiers, peak, peak_note = _off_peak(entry, tiers, field_names)
    if peak_note:
        notes.append(peak_note)
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
        max_output_tokens=_int_or_none(entry.get("max_output_tokens")),
        deprecation_date=_date_or_none(entry.get("deprecation_date")),
        notes="; ".join(notes),
        schedules=[
            PriceSchedule(
                as_of=as_of,
                source=source,
                note="imported from LiteLLM model_prices_and_context_window.json",
                tiers=tiers,
                peak=peak,
                service_tiers=service_tiers,
                service_tiers_source=f"{source} (*_batches / *_priority / *_flex)" if service_tiers else "",
                **(_anthropic_extras(entry, as_of=as_of, source=source) if provider == "anthropic" else {}),
            )
        ],
    )


_SERVICE_TIERS = {"batches": "batch", "priority": "priority", "flex": "flex"}
"""LiteLLM's key suffix -> the service tier name a usage reports."""


def _service_tier_levels(entry: Mapping[str, Any], field_names: Mapping[str, str], suffix: str) -> list[Tier]:
    """The tiers of one service tier, or [] when the file lacks its input or output rate."""
    base = {field: _per_mtok(entry.get(f"{key}_{suffix}")) for key, field in field_names.items()}
    if base.get("input") is None or base.get("output") is None:
        return []
    levels = [Tier(above_prompt_tokens=0, **base)]
    pattern = re.compile(rf"^(?P<field>.+)_above_(?P<k>\d+)k_tokens_{suffix}$")
    by_threshold: dict[int, dict[str, float | None]] = {}
    for key, value in entry.items():
        match = pattern.match(key)
        field = field_names.get(match.group("field")) if match else None
        rate = _per_mtok(value)
        if match and field is not None and rate is not None:
            by_threshold.setdefault(int(match.group("k")) * 1000, {})[field] = rate
    for threshold, fields in sorted(by_threshold.items()):
        levels.append(Tier(above_prompt_tokens=threshold, **{**base, **fields}))
    return levels


def _anthropic_extras(entry: Mapping[str, Any], *, as_of: date, source: str) -> dict[str, Any]:
    """Geography and speed multipliers (`provider_specific_entry`) and the web search fee."""
    extras: dict[str, Any] = {}
    specific = entry.get("provider_specific_entry")
    if isinstance(specific, Mapping):
        where = f"{source} provider_specific_entry"
        for key, field in (("us", "inference_geo"), ("fast", "speed")):
            value = specific.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                extras[field] = {key: PriceModifier(multiplier=float(value), source=where, as_of=as_of)}
    search = entry.get("search_context_cost_per_query")
    if isinstance(search, Mapping):
        fees = {v for v in search.values() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if len(fees) == 1:
            extras["server_tools"] = {
                "web_search_requests": RequestFee(usd_per_request=float(fees.pop()), source=f"{source} search_context_cost_per_query", as_of=as_of)
            }
    return extras


_DAY_MINUTES = 24 * 60
_WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _off_peak(
    entry: Mapping[str, Any], tiers: list[Tier], field_names: Mapping[str, str]
) -> tuple[list[Tier], PeakHours | None, str | None]:
    """(the schedule's tiers, its peak hours, a note). With a mappable `off_peak_pricing`, the
    schedule's tiers are the off-peak rates and the base rates become the peak tiers."""
    block = entry.get("off_peak_pricing")
    if block is None:
        return tiers, None, None
    if not isinstance(block, Mapping):
        return tiers, None, "LiteLLM off_peak_pricing is not an object: base (peak) rates only"
    overrides = {field: _per_mtok(block.get(key)) for key, field in field_names.items() if _per_mtok(block.get(key)) is not None}
    hours = _peak_windows(block)
    if hours is None or not overrides:
        return tiers, None, "LiteLLM off_peak_pricing has windows this table cannot express: base (peak) rates only"
    windows, weekdays_only = hours
    off_peak = [t.model_copy(update=overrides) for t in tiers]
    note = "off-peak rates from LiteLLM off_peak_pricing; peak = the base rates"
    if not windows:
        return off_peak, None, note + " (off-peak all week)"
    return off_peak, PeakHours(windows_utc=windows, weekdays_only=weekdays_only, tiers=tiers), note


def _peak_windows(block: Mapping[str, Any]) -> tuple[list[tuple[str, str]], bool] | None:
    """Peak windows (the complement of the off-peak hours) and whether peak is weekdays only, or
    None when the off-peak time differs between weekdays or cannot be read."""
    days: list[set[int]] = [set() for _ in range(7)]
    windows = block.get("windows")
    if windows is None and "hours_utc" in block:
        windows = [{"hours_utc": block["hours_utc"]}]
    if not isinstance(windows, list) or not windows:
        return None
    for window in windows:
        if not isinstance(window, Mapping):
            return None
        minutes = _minutes(window.get("hours_utc"))
        weekdays = _weekdays(window.get("weekdays", list(range(1, 8))))
        if minutes is None or weekdays is None:
            return None
        for day in weekdays:
            days[day] |= minutes
    weekday_sets = {frozenset(d) for d in days[:5]}
    if len(weekday_sets) != 1:
        return None
    weekday = days[0]
    whole_day = set(range(_DAY_MINUTES))
    if all(days[d] == whole_day for d in (5, 6)):
        weekdays_only = True
    elif all(days[d] == weekday for d in (5, 6)):
        weekdays_only = False
    else:
        return None
    peak = sorted(whole_day - weekday)
    ranges: list[tuple[str, str]] = []
    for minute in peak:
        if ranges and _to_minutes(ranges[-1][1]) == minute:
            ranges[-1] = (ranges[-1][0], _hhmm(minute + 1))
        else:
            ranges.append((_hhmm(minute), _hhmm(minute + 1)))
    return ranges, weekdays_only


def _minutes(hours: Any) -> set[int] | None:
    """Minutes of the day covered by "HH:MM-HH:MM" ranges ("00:00-00:00" is the whole day; a range
    ending earlier than it starts runs past midnight)."""
    items = [hours] if isinstance(hours, str) else hours
    if not isinstance(items, list) or not items:
        return None
    covered: set[int] = set()
    for item in items:
        if not isinstance(item, str) or item.count("-") != 1:
            return None
        start_text, end_text = item.split("-")
        start, end = _to_minutes(start_text), _to_minutes(end_text)
        if start is None or end is None:
            return None
        if end == 0:
            end = _DAY_MINUTES
        if start < end:
            covered.update(range(start, end))
        else:
            covered.update(range(start, _DAY_MINUTES))
            covered.update(range(0, end))
    return covered


def _weekdays(values: Any) -> list[int] | None:
    """ISO weekdays (1 = Monday, as LiteLLM numbers them, or names) as 0-based indexes."""
    if not isinstance(values, list) or not values:
        return None
    out = []
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 7:
            out.append(value - 1)
        elif isinstance(value, str) and value[:3].lower() in _WEEKDAY_NAMES:
            out.append(_WEEKDAY_NAMES.index(value[:3].lower()))
        else:
            return None
    return out


def _to_minutes(text: str) -> int | None:
    try:
        hours, minutes = text.strip().split(":")
        value = int(hours) * 60 + int(minutes)
    except ValueError:
        return None
    return value if 0 <= value <= _DAY_MINUTES else None


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


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
