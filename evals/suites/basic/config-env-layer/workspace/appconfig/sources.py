"""Where raw (string) configuration values come from."""

import configparser

from appconfig.schema import ConfigError


def from_ini(text: str) -> dict[str, dict[str, str]]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise ConfigError(f"bad INI text: {exc}") from exc
    return {section: dict(parser.items(section)) for section in parser.sections()}
