"""Assemble the final configuration from its layers."""

from collections.abc import Mapping

from appconfig.merge import merge_layers
from appconfig.schema import Schema, apply_schema
from appconfig.sources import from_env, from_ini


def load_config(
    ini_text: str,
    schema: Schema,
    defaults: dict[str, dict[str, str]] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, dict[str, object]]:
    """Defaults, then the INI text, then environment variables; every value typed by `schema`."""
    layers = [defaults or {}, from_ini(ini_text)]
    if env is not None:
        layers.append(from_env(env))
    return apply_schema(merge_layers(*layers), schema)
