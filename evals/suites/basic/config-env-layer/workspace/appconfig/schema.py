"""Typed configuration: the schema and value coercion."""

Schema = dict[str, dict[str, type]]


class ConfigError(ValueError):
    pass


def coerce(value: str, kind: type, where: str) -> object:
    """`value` converted to `kind`; `where` names the setting ("section.key")."""
    if kind is bool:
        return value.lower() == "true"
    return kind(value)


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
