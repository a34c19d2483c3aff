"""`--help` option panels that fit an 80-column terminal without cutting an option's name.

Typer draws each panel as a six-column table (long names, short names, negative long, negative
short, type, help) and lets rich shrink every column to fit: at 80 columns names were cut
(`--host-tier-toke…`) and help squeezed to ~18 characters a line. Here each option is a line of
its names and type, with its help below it, indented, at the terminal's full width; wide terminals
(WIDE_FROM columns) get two columns, the names never wrapped. Panels (`rich_help_panel`) and
everything else of typer's help stay as they are.

This replaces one private function of `typer.rich_utils`, checked by name and signature before it
is replaced: a typer without it keeps its own layout (tests/harness/test_cli_80_columns.py then
fails, saying why).
"""

from __future__ import annotations

import inspect
from typing import Any

#: From this many columns, names and help sit side by side.
WIDE_FROM = 120
#: How far help text is indented under its option's names.
HELP_INDENT = 4

_EXPECTED = ("name", "params", "ctx", "markup_mode", "console")


def _names(param: Any, ctx: Any, rich_utils: Any) -> Any:
    """"--max-steps -n  <int range> [x>=1]": the option's names and type on one line."""
    from rich.text import Text

    is_argument = isinstance(param, rich_utils.TyperArgument)
    if is_argument:
        shown = [param.display_name_raw + ("..." if param.metavar is None and param.nargs != 1 else "")]
    else:
        shown = sorted(param.opts, key=lambda o: not o.startswith("--"))
    negative = list(param.secondary_opts)
    line = Text()
    if param.required:
        line.append(rich_utils.REQUIRED_SHORT_STRING + " ", style=rich_utils.STYLE_REQUIRED_SHORT)
    line.append_text(rich_utils.highlighter(" ".join(shown)))
    if negative:
        line.append(" / ")
        line.append_text(rich_utils.negative_highlighter(" ".join(negative)))
    kind = Text(style=rich_utils.STYLE_TYPES)
    display_type = param.display_type_rich(ctx=ctx)
    if display_type:
        kind.append(display_type)
    number_range = param._get_number_range_help_str()
    if number_range:
        kind.append(rich_utils.RANGE_STRING.format(number_range))
    if kind.plain:
        line.append("  ")
        line.append_text(rich_utils.types_highlighter(kind))
    line.no_wrap = True
    return line


def _options_panel(*, name: str, params: list[Any], ctx: Any, markup_mode: Any, console: Any) -> None:
    """Typer's `_print_options_panel`, laid out to fit `console.width`."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from typer import rich_utils

    if not params:
        return
    rows = [(_names(param, ctx, rich_utils), rich_utils._get_parameter_help(param=param, ctx=ctx, markup_mode=markup_mode))
            for param in params]
    body: Any
    if console.width >= WIDE_FROM:
        body = Table(show_header=False, box=None, expand=True, padding=(0, 1), pad_edge=False)
        body.add_column(no_wrap=True)
        body.add_column(ratio=1)
        for names, help_text in rows:
            body.add_row(names, help_text)
    else:
        parts: list[Any] = []
        for names, help_text in rows:
            parts.append(names)
            parts.append(Padding(help_text, (0, 0, 0, HELP_INDENT)))
        body = Group(*parts)
    console.print(Panel(body, border_style=rich_utils.STYLE_OPTIONS_PANEL_BORDER, title=name,
                        title_align=rich_utils.ALIGN_OPTIONS_PANEL))


def fit_option_panels() -> bool:
    """Draw typer's option panels with `_options_panel`; False (and typer's own layout) when this
    typer has no `_print_options_panel` taking the expected arguments."""
    from typer import rich_utils

    original = getattr(rich_utils, "_print_options_panel", None)
    if original is None or original is _options_panel:
        return original is _options_panel
    if tuple(inspect.signature(original).parameters) != _EXPECTED:
        return False
    rich_utils._print_options_panel = _options_panel
    return True
