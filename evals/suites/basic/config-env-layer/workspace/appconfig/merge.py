"""Layering of raw configuration."""


def merge_layers(*layers: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Later layers win, key by key within each section."""
    result: dict[str, dict[str, str]] = {}
    for layer in layers:
        for section, values in layer.items():
            result.setdefault(section, {}).update(values)
    return result
