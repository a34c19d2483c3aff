"""Where runs and reports take their prices from: the snapshot shipped with hitrate, or a price
file the user keeps current without waiting for a release.

In order: `--prices FILE` on the command line; `$HITRATE_PRICES`; `prices = "FILE"` in the config
file (see hitrate.harness.defaults); else the shipped snapshot. A file is either a hitrate price
snapshot (`hitrate prices --json`'s source format, with `models` and `as_of`) or LiteLLM's
`model_prices_and_context_window.json`. Models a LiteLLM file prices replace the shipped entries
of the same name; the shipped entries of other models stay (the file lacks, e.g., DeepSeek's
off-peak rates and models newer than its release). The merged table has its own snapshot id, which
every ledger row priced with it records, so a run priced from a file can be re-priced later.
"""

from __future__ import annotations

import functools
import json
import os
import tomllib
from datetime import date
from pathlib import Path

from hitrate.harness.defaults import config_path
from hitrate.store.litellm_import import LiteLLMFormatError, load_litellm_file
from hitrate.store.prices import PriceSnapshot, PriceTable, canonical_model_name

ENV_PRICES = "HITRATE_PRICES"
CONFIG_KEY = "prices"


class PriceSourceError(ValueError):
    """A price file that cannot be used; the message names the file and the problem."""


def configured_price_file(env: dict[str, str] | None = None) -> Path | None:
    """`$HITRATE_PRICES`, else the config file's `prices` key (relative to the config file)."""
    env = dict(os.environ) if env is None else env
    if env.get(ENV_PRICES):
        return Path(env[ENV_PRICES]).expanduser()
    path = config_path(env)
    if not path.is_file():
        return None
    try:
        value = tomllib.loads(path.read_text(encoding="utf-8")).get(CONFIG_KEY)
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise PriceSourceError(f"config file {path} is not valid TOML: {exc}") from exc
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise PriceSourceError(f"config file {path}: `{CONFIG_KEY}` must be the path of a price file")
    file = Path(value).expanduser()
    return file if file.is_absolute() else path.parent / file


def load_price_file(path: Path) -> PriceTable:
    """A hitrate snapshot file as it is, or a LiteLLM file merged over the shipped snapshot.
    Read once per file version: an eval's sessions share the parsed table."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as exc:
        raise PriceSourceError(f"cannot read price file {path}: {exc.strerror or exc}") from exc
    return _load_price_file(path.resolve(), stamp)


@functools.lru_cache(maxsize=8)
def _load_price_file(path: Path, _mtime_ns: int) -> PriceTable:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise PriceSourceError(f"cannot read price file {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise PriceSourceError(f"price file {path} is not JSON: {exc}") from exc
    if isinstance(data, dict) and "models" in data and "as_of" in data:
        try:
            return PriceTable(PriceSnapshot.model_validate(data))
        except ValueError as exc:
            raise PriceSourceError(f"price file {path} is not a valid hitrate price snapshot: {exc}") from exc
    try:
        imported = load_litellm_file(path, as_of=date.fromtimestamp(path.stat().st_mtime))
    except LiteLLMFormatError as exc:
        raise PriceSourceError(f"price file {path} is neither a hitrate snapshot nor a LiteLLM price map: {exc}") from exc
    return merge_over_shipped(imported)


def merge_over_shipped(imported: PriceTable) -> PriceTable:
    """The shipped snapshot with every model `imported` prices replaced by the imported entry."""
    taken = {canonical_model_name(name) for m in imported.models for name in (m.model, *m.aliases)}
    kept = [m for m in PriceTable.default().models
            if not any(canonical_model_name(name) in taken for name in (m.model, *m.aliases))]  # fmt: skip
    snapshot = imported.snapshot
    return PriceTable(PriceSnapshot(
        as_of=snapshot.as_of,
        description=f"{snapshot.description}, over the shipped snapshot {PriceTable.default().id}",
        models=[*snapshot.models, *kept],
    ))  # fmt: skip


def configured_price_table() -> PriceTable:
    """The configured file's table, else the shipped snapshot (no command-line file)."""
    return price_table(None)


def price_table(path: Path | None = None) -> PriceTable:
    """The table for this invocation: `path` (from `--prices`), else the configured file, else shipped."""
    chosen = path or configured_price_file()
    return PriceTable.default() if chosen is None else load_price_file(chosen)
