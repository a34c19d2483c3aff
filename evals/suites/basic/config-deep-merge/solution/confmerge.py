"""Layer configuration dictionaries."""

import copy


def deep_merge(base: dict, override: dict) -> dict:
    """`base` with `override` merged on top of it; inputs are left untouched."""
    result = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
