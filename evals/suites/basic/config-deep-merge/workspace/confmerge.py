"""Layer configuration dictionaries."""


def deep_merge(base: dict, override: dict) -> dict:
    """`base` with `override` merged on top of it."""
    result = base
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key].update(value)
        else:
            result[key] = value
    return result
