"""Render inventory rows in any registered format."""

# Importing the format modules registers their renderers.
from reports import csv_out, json_out, markdown_out, text_out  # noqa: F401
from reports.model import Row, format_cents
from reports.registry import available_formats, get_renderer, register

__all__ = ["Row", "available_formats", "format_cents", "get_renderer", "register", "render"]


def render(rows: list[Row], fmt: str) -> str:
    return get_renderer(fmt)(rows)
