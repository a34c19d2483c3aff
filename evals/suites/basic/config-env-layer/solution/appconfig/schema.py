"""Typed configuration: the schema and value coercion."""

Schema = dict[str, dict[str, type]]

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class ConfigError(ValueError):
    pass


def coerce(value: str, kind: type, where: str) -> object:
    """`value` converted to `kind`; `where` names the setting ("section.key")."""
    if kind is bool:
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    else:
        try:
            return kind(value)
        except (TypeError, ValueError):
            pass
    raise ConfigError(f"{where}: expected {kind.__name__}, got {value!r}")


def apply_schema(raw: dict[str, dict[str, str]], schema: Schema) -> dict[str, dict[str, object]]:
    result: dict[str, dict[str, object]] = {}
    for section, values in raw.items():
        if section not in schema:
            raise ConfigError(f"unknown section: {section}")
        for key, value in values.items():
            if key not in schema[section]:
                raise ConfigError(f"unknown key: {section}.{key}")
            result.setdefault(section, {})[key] = coerce(value, schema[section][key], f"{section}.{key}")
    return result
