"""How the command line writes numbers and tables: money, token counts, percentages, and a rich
console that honours the terminal's width, `COLUMNS`, `NO_COLOR` and pipes.

One module so that `ledger`, `prices`, `whatif`, `report` and the run summary print a dollar
amount, a token count or a ratio the same way."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, TextIO

from hitrate.harness.summary import money

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

PIPE_WIDTH = 80
"""Width of tables written to a pipe or file, where there is no terminal to ask: the width most
terminals open with, so captured output reads the same as on screen."""


def tokens(value: int | None) -> str:
    """A token count in at most six characters: 950, 12.3k, 181k, 1.42M; "?" when unknown."""
    if value is None:
        return "?"
    n = abs(value)
    if n < 10_000:
        return f"{value:,}"
    if n < 100_000:
        return f"{value / 1000:.1f}k"
    if n < 1_000_000:
        return f"{value / 1000:.0f}k"
    if n < 100_000_000:
        return f"{value / 1_000_000:.2f}M"
    return f"{value / 1_000_000:.0f}M"


def percent(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}%}"


def colour_wanted(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never when `NO_COLOR` is set to anything (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def table_width(stream: TextIO | None = None) -> int:
    """`COLUMNS` when set, else the terminal's width, else PIPE_WIDTH for pipes and files."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = stream or sys.stdout
    isatty = getattr(stream, "isatty", None)
    if isatty and isatty():
        return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
    return PIPE_WIDTH


def console(*, stderr: bool = False, file: TextIO | None = None, width: int | None = None) -> Console:
    """A rich console for tables: the width from `table_width`, colour from `colour_wanted`.

    Markup is off: what it prints (run labels, model names, prompts, miss reasons) comes from
    users and models, and a `[/]` or `[link=...]` in it must show as typed, not be read as a rich
    tag (or crash the table). Styles are given as `style=` or `Text`; a caller that prints its own
    markup passes `markup=True` for that call and escapes what it interpolates."""
    from rich.console import Console

    stream = file or (sys.stderr if stderr else sys.stdout)
    coloured = colour_wanted(stream)
    return Console(
        file=stream,
        width=width or table_width(stream),
        no_color=not coloured,
        color_system="auto" if coloured else None,
        highlight=False,
        markup=False,
        force_terminal=coloured,
    )


def shrink_to_fit(table: Table, columns: list[int] | list[tuple[int, int]], out: Console, *, floor: int = 8) -> None:
    """Narrow the text columns `columns` (a model name, a prompt: shown cut with an ellipsis), in
    that order, just enough for `table` to fit `out`'s width; an entry may be (column, its floor).
    Rich would otherwise squeeze every column alike and cut the figures; the figures are what must
    stay whole."""
    steps = [c if isinstance(c, tuple) else (c, floor) for c in columns]
    flexible = {index for index, _ in steps}
    for i, other in enumerate(table.columns):
        if i not in flexible:
            other.min_width = max([len(str(c)) for c in other._cells] + [len(str(other.header))])
    for index, least in steps:
        excess = out.measure(table, options=out.options.update_width(10_000)).maximum - out.width
        if excess <= 0:
            return
        target = table.columns[index]
        natural = target.max_width or max([len(str(c)) for c in target._cells] + [len(str(target.header))])
        target.max_width = max(least, natural - excess)
        target.no_wrap = True
        target.overflow = "ellipsis"
