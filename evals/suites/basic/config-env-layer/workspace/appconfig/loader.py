"""Assemble the final configuration from its layers."""

from appconfig.merge import merge_layers
from appconfig.schema import Schema, apply_schema
from appconfig.sources import from_ini


def load_config(
    ini_text: str, schema: Schema, defaults: dict[str, dict[str, str]] | None = None
) -> dict[str, dict[str, object]]:
    """Defaults, then the INI text on top; every value typed by `schema`."""
    return apply_schema(merge_layers(defaults or {}, from_ini(ini_text)), schema)
