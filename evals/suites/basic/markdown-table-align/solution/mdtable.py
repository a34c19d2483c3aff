"""Render rows as a Markdown table."""

_ALIGNMENTS = ("left", "right", "center")


def _pad(text: str, width: int, alignment: str | None) -> str:
    room = width - len(text)
    if alignment == "right":
        return " " * room + text
    if alignment == "center":
        left = room // 2
        return " " * left + text + " " * (room - left)
    return text + " " * room


def _separator(width: int, alignment: str | None) -> str:
    if alignment == "left":
        return ":" + "-" * (width - 1)
    if alignment == "right":
        return "-" * (width - 1) + ":"
    if alignment == "center":
        return ":" + "-" * (width - 2) + ":"
    return "-" * width


def _escape(value: object) -> str:
    return str(value).replace("|", "\\|")


def render_table(headers: list[str], rows: list[list[object]], align: list[str] | None = None) -> str:
    columns = len(headers)
    if align is not None:
        if len(align) != columns:
            raise ValueError(f"align has {len(align)} entries for {columns} columns")
        for alignment in align:
            if alignment not in _ALIGNMENTS:
                raise ValueError(f"unknown alignment {alignment!r}")
    alignments: list[str | None] = list(align) if align is not None else [None] * columns
    head = [_escape(h) for h in headers]
    body = []
    for row in rows:
        if len(row) > columns:
            raise ValueError(f"row has {len(row)} cells for {columns} columns")
        body.append([_escape(v) for v in row] + [""] * (columns - len(row)))
    widths = [max(3, len(head[i]), *(len(r[i]) for r in body)) for i in range(columns)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(_pad(c, w, a) for c, w, a in zip(cells, widths, alignments)) + " |"

    separator = "| " + " | ".join(_separator(w, a) for w, a in zip(widths, alignments)) + " |"
    return "\n".join([line(head), separator, *(line(r) for r in body)])
