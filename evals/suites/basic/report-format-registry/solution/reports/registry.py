"""Renderers by format name; modules register themselves with @register(name)."""

from typing import Callable

from reports.model import Row

Renderer = Callable[[list[Row]], str]

_RENDERERS: dict[str, Renderer] = {}


def register(name: str) -> Callable[[Renderer], Renderer]:
    def decorate(function: Renderer) -> Renderer:
        if name in _RENDERERS:
            raise ValueError(f"format {name!r} is already registered")
        _RENDERERS[name] = function
        return function

    return decorate


def available_formats() -> list[str]:
    return sorted(_RENDERERS)


def get_renderer(name: str) -> Renderer:
    try:
        return _RENDERERS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; available: {', '.join(available_formats())}") from None
