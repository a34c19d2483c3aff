"""Where raw (string) configuration values come from."""

import configparser
from collections.abc import Mapping

from appconfig.schema import ConfigError


def from_ini(text: str) -> dict[str, dict[str, str]]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise ConfigError(f"bad INI text: {exc}") from exc
    return {section: dict(parser.items(section)) for section in parser.sections()}


def from_env(env: Mapping[str, str], prefix: str = "APP") -> dict[str, dict[str, str]]:
    """`{prefix}__SECTION__KEY=value` variables as raw configuration."""
    marker = f"{prefix}__"
    result: dict[str, dict[str, str]] = {}
    for name, value in env.items():
        if not name.startswith(marker):
            continue
        parts = name[len(marker):].split("__")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(f"environment variable {name} is not {marker}SECTION__KEY")
        section, key = (p.lower() for p in parts)
        result.setdefault(section, {})[key] = value
    return result
