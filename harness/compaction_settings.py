"""The `[compaction]` table of the config file: how a session keeps inside its model's window.

    [compaction]
    mode = "client"          # client | native | off
    at = 0.8                 # compact past this share of the window
    context_window = 32000   # override every model's window (tokens)
    clear_tool_results = true
    idle = false             # compact an idle session before its cached prefix expires

Command-line flags (`--compaction`, `--compact-at`, `--context-window`, ...) win over these keys;
the keys win over the defaults.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hitrate.harness.models import ModelSpecError

CompactionMode = Literal["client", "native", "off"]
"""client: hitrate's cache-aware summary, on every backend; native: the provider's server-side
compaction where the route has one (Anthropic `compact_20260112`, OpenAI Responses
`context_management`), else client; off: never compact (the session ends at the window)."""

CONFIG_TABLE = "compaction"


class CompactionSettings(BaseModel):
    """What the config file's `[compaction]` table may say."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: CompactionMode = "client"
    at: float = Field(0.8, gt=0, le=1)
    context_window: int | None = Field(None, ge=1)
    clear_tool_results: bool = True
    idle: bool = False


class CompactionSettingsError(ModelSpecError):
    """The config file's `[compaction]` table cannot be used; the message says what to fix."""


def load_compaction_settings(path: Path) -> CompactionSettings:
    """The `[compaction]` table of the config file at `path` (defaults when it has none)."""
    if not path.is_file():
        return CompactionSettings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise CompactionSettingsError(f"config file {path} is not valid TOML: {exc}") from exc
    table = data.get(CONFIG_TABLE, {})
    if not isinstance(table, dict):
        raise CompactionSettingsError(f"config file {path}: `{CONFIG_TABLE}` must be a table ([{CONFIG_TABLE}])")
    try:
        return CompactionSettings.model_validate(table)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise CompactionSettingsError(f"config file {path}, [{CONFIG_TABLE}]: {problems}") from exc


def compaction_keys(path: Path) -> dict[str, object]:
    """The config file's `[compaction]` table as `SessionConfig` fields."""
    settings = load_compaction_settings(path)
    return {
        "context_window": settings.context_window,
        "compact_at": settings.at,
        "compaction": settings.mode,
        "clear_tool_results": settings.clear_tool_results,
        "idle_compaction": settings.idle,
    }
