"""The session settings of `hitrate run`: each flag given, else the config file's key, else the default."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from hitrate.harness.cli import fail

if TYPE_CHECKING:
    from hitrate.harness.session import SessionConfig
    from hitrate.harness.wire.effort import Effort
    from hitrate.harness.wire.timeouts import CallTimeouts



def _fail(message: str) -> NoReturn:
    from hitrate.harness.commands.run import EXIT_USAGE  # run's exit codes; run imports this module

    fail(message, EXIT_USAGE)


def session_config(
    max_output_tokens: int | None, context_window: int | None, compact_at: float | None, compaction: str | None,
    clear_tool_results: bool | None, *, effort: "Effort | None" = None, timeouts: "CallTimeouts | None" = None,
    tool_protocol: str | None = None,
) -> "SessionConfig":
    """The session's settings: each flag given, else the config file's `[compaction]` key, else the default."""
    from hitrate.harness.compaction_settings import CompactionSettingsError, load_compaction_settings
    from hitrate.harness.defaults import config_path
    from hitrate.harness.session import SessionConfig

    if compaction is not None and compaction not in ("client", "native", "off"):
        _fail(f"--compaction {compaction!r}: use client, native or off")
    if tool_protocol is not None and tool_protocol not in ("native", "text"):
        _fail(f"--tool-protocol {tool_protocol!r}: use native or text")
    try:
        settings = load_compaction_settings(config_path())
    except CompactionSettingsError as exc:
        _fail(str(exc))
    return SessionConfig(
        max_output_tokens=max_output_tokens,
        context_window=context_window if context_window is not None else settings.context_window,
        compact_at=compact_at if compact_at is not None else settings.at,
        compaction=compaction or settings.mode,  # type: ignore[arg-type]
        clear_tool_results=clear_tool_results if clear_tool_results is not None else settings.clear_tool_results,
        effort=effort,
        tool_protocol=tool_protocol,  # type: ignore[arg-type]
        **({"timeouts": timeouts} if timeouts is not None else {}),
    )


def chosen_effort_or_exit(flag: str | None) -> "Effort | None":
    """--effort, else the config file's `effort`; exits with a usage error on a level that does not exist."""
    from hitrate.harness.defaults import chosen_effort
    from hitrate.harness.models import ModelSpecError

    try:
        return chosen_effort(flag)
    except ModelSpecError as exc:
        _fail(str(exc))
