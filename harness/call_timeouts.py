"""The call timeouts a run uses: command-line flags first, then the config file's `[timeouts]`
table, then the defaults of `CallTimeouts`.

    [timeouts]
    connect_s = 10      # reaching the server
    first_byte_s = 120  # from sending a request to the response headers
    idle_s = 300        # silence allowed between two chunks of a streamed reply
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from hitrate.harness.wire.timeouts import CallTimeouts


class TimeoutConfigError(ValueError):
    """The config file's `[timeouts]` table (or a flag) holds something that is not a timeout."""


def configured_timeouts(config: Path, **flags: float | None) -> CallTimeouts:
    """Timeouts from the flags given (`connect_s=`, `first_byte_s=`, `idle_s=`; None: not given),
    else the config file at `config`, else the defaults."""
    table: dict[str, object] = {}
    if config.is_file():
        try:
            data = tomllib.loads(config.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
            raise TimeoutConfigError(f"config file {config} is not valid TOML: {exc}") from exc
        section = data.get("timeouts", {})
        if not isinstance(section, dict):
            raise TimeoutConfigError(f"config file {config}: `timeouts` must be a table ([timeouts])")
        table = dict(section)
    table.update({key: value for key, value in flags.items() if value is not None})
    try:
        return CallTimeouts(**table)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise TimeoutConfigError(
            f"timeouts ({config} [timeouts] or the --*-timeout flags): {problems} "
            f"(known keys: {', '.join(CallTimeouts.model_fields)}; seconds, above 0)"
        ) from exc
