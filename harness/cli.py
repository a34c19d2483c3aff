"""The `hitrate` command line.

Commands that belong to the harness and the leaves below it are registered here. Components that
sit above the harness (evals, tui) must not be imported by it, so they contribute their commands
through the `hitrate.commands` entry-point group declared in pyproject.toml; the CLI loads them at
start-up. That keeps imports pointing one way (tui, evals -> harness).
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import entry_points
from typing import Any, Callable, NoReturn

import typer

from hitrate.store.ledger import LedgerError

app = typer.Typer(
    name="hitrate",
    help="A coding-agent harness built for prompt-cache hits, with every call measured.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Harness-level command modules, each exposing `register(app: typer.Typer) -> None`.
_HARNESS_COMMAND_MODULES: list[str] = [
    "hitrate.harness.cli_serve",
    "hitrate.harness.cli_store",
    "hitrate.harness.cli_run",
]


def command_help(doc: str | None) -> dict[str, str]:
    """`help` and `short_help` for `typer.Typer.command` from a command's docstring.

    Typer's rich help keeps every line break of a docstring, so text wrapped in the source would
    show wrapped twice. Each paragraph becomes one line (the terminal wraps it), and the first
    paragraph is the one-line summary `hitrate --help` lists."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(doc or "").split("\n\n") if p.strip()]
    return {"help": "\n\n".join(paragraphs), "short_help": paragraphs[0] if paragraphs else ""}


def add_command(target: typer.Typer, name: str, callback: Callable[..., Any]) -> None:
    """Register `callback` as command `name`, its help taken from its docstring (see `command_help`)."""
    target.command(name, **command_help(callback.__doc__))(callback)


def fail(message: str, code: int) -> NoReturn:
    """Print `error: message` to stderr and exit with `code`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _register_all(target: typer.Typer) -> None:
    for module_name in _HARNESS_COMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(target)
    for ep in sorted(entry_points(group="hitrate.commands"), key=lambda e: e.name):
        register: Callable[[typer.Typer], None] = ep.load()
        register(target)


# A callback makes `hitrate` a group of subcommands even while only one command is registered;
# the group's help text is the `help=` given to the Typer above.
@app.callback()
def _root() -> None:
    pass


def main() -> None:
    _register_all(app)
    try:
        app()
    except LedgerError as exc:
        # Raised wherever a command opens its ledger (`--db`, `$HITRATE_DB`); caught once here
        # so every command, entry-point ones included, reports it the same way.
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
