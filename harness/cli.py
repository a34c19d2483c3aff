"""The `hitrate` command line.

Commands that belong to the harness and the leaves below it are registered here. Components that
sit above the harness (evals, tui) must not be imported by it, so they contribute their commands
through the `hitrate.commands` entry-point group declared in pyproject.toml; the CLI loads them at
start-up. That keeps imports pointing one way (tui, evals -> harness).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Callable

import typer

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


def _register_all(target: typer.Typer) -> None:
    for module_name in _HARNESS_COMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(target)
    for ep in sorted(entry_points(group="hitrate.commands"), key=lambda e: e.name):
        register: Callable[[typer.Typer], None] = ep.load()
        register(target)


@app.callback()
def _root() -> None:
    """hitrate: every request assembled for the prompt cache, every call measured."""


def main() -> None:
    _register_all(app)
    app()


if __name__ == "__main__":
    main()
