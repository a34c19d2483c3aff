"""Render rows as a Markdown table."""


def _line(cells: list[str], widths: list[int]) -> str:
    return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths)) + " |"


def render_table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [[str(value) for value in row] for row in rows]
    widths = [max(3, len(header), *(len(row[i]) for row in cells if i < len(row))) for i, header in enumerate(headers)]
    lines = [_line(headers, widths), _line(["-" * width for width in widths], widths)]
    lines += [_line(row, widths) for row in cells]
    return "\n".join(lines)
