"""Render inventory rows as CSV, JSON or aligned text."""

from reports.csv_out import to_csv
from reports.json_out import to_json
from reports.model import Row, format_cents
from reports.text_out import to_text

__all__ = ["Row", "format_cents", "render"]


def render(rows: list[Row], fmt: str) -> str:
    if fmt == "csv":
        return to_csv(rows)
    elif fmt == "json":
        return to_json(rows)
    elif fmt == "text":
        return to_text(rows)
    raise ValueError(f"unknown format: {fmt}")
