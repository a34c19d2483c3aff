"""The `hitrate` command line.

Commands that belong to the harness and the leaves below it are registered here. Components that
sit above the harness (evals, tui) must not be imported by it, so they contribute their commands
through the `hitrate.commands` entry-point group declared in pyproject.toml; the CLI loads them at
start-up. That keeps imports pointing one way (tui, evals -> harness).

Every command module is imported to build `hitrate --help`, so none may import a heavy library
(the provider SDKs, matplotlib, torch, transformers, textual) at module level: each command imports
what it needs in its own body. tests/harness/test_harness_cli_startup.py guards this.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from importlib.metadata import PackageNotFoundError, entry_points, requires, version
from typing import Any, Callable, NoReturn

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
    "hitrate.harness.commands.serve",
    "hitrate.harness.commands.store",
    "hitrate.harness.commands.run",
    "hitrate.harness.commands.models",
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
    """Print `error: message` to stderr and exit with `code`. The message may quote a server or a
    model (an API error body): its control characters are shown, not sent to the terminal."""
    from hitrate.harness.terminal_text import visible

    typer.echo(f"error: {visible(message)}", err=True)
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
def installed_version() -> str:
    try:
        return version("hitrate")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"hitrate {installed_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the installed version and exit."
    ),
) -> None:
    pass


def extra_requirements(extra: str) -> list[str]:
    """Distribution names the optional `extra` of the installed hitrate requires, read from the
    installed metadata so pyproject.toml stays the one place that lists them."""
    try:
        requirements = requires("hitrate") or []
    except PackageNotFoundError:
        return []
    names = []
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", marker):
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec.strip())
            if match:
                names.append(match.group(0))
    return names


def missing_requirements(extra: str) -> list[str]:
    """The distributions of `extra` that are not installed ([] when it is complete)."""
    missing = []
    for name in extra_requirements(extra):
        try:
            version(name)
        except PackageNotFoundError:
            missing.append(name)
    return missing


def require_extra(extra: str, what: str) -> None:
    """Exit with code 2 and the install command when a package of `extra` is missing, before
    `what` imports it and fails with a bare ModuleNotFoundError."""
    missing = missing_requirements(extra)
    if missing:
        fail(f"{what} needs the '{extra}' extra ({', '.join(missing)} not installed): pip install 'hitrate[{extra}]'", 2)


OPTIONAL_VALUE_OPTIONS = ("--resume",)
"""Options whose value may be left out: `hitrate run --resume` alone lists the sessions to pick
from. Click has no optional option values, so a bare one is passed on as `--resume=` (empty)."""


def bare_options_as_empty(argv: list[str]) -> list[str]:
    """argv with each option of OPTIONAL_VALUE_OPTIONS that has no value (last, or followed by
    another option) written as `--option=`."""
    out = []
    for i, arg in enumerate(argv):
        following = argv[i + 1] if i + 1 < len(argv) else None
        if arg in OPTIONAL_VALUE_OPTIONS and (following is None or following.startswith("-")):
            out.append(arg + "=")
        else:
            out.append(arg)
    return out


def main() -> None:
    from hitrate.harness.defaults import apply_redaction_config

    _register_all(app)
    sys.argv = bare_options_as_empty(sys.argv)
    if len(sys.argv) == 1 or "--help" in sys.argv[1:]:
        # Only for help: the layout imports typer's rich help (half a second) that nothing else needs.
        from hitrate.harness.commands.help_panels import fit_option_panels

        fit_option_panels()
    try:
        apply_redaction_config()
    except ValueError as exc:
        fail(str(exc), 2)
    try:
        app()
    except Exception as exc:
        # A LedgerError is raised wherever a command opens its ledger (`--db`, `$HITRATE_DB`);
        # caught once here so every command, entry-point ones included, reports it the same way.
        # Looked up in sys.modules so that commands which never open a ledger never import it:
        # if the module is not loaded, no LedgerError can have been raised.
        ledger = sys.modules.get("hitrate.store.ledger")
        if ledger is not None and isinstance(exc, ledger.LedgerError):
            typer.echo(f"error: {exc}", err=True)
            raise SystemExit(2) from None
        raise


if __name__ == "__main__":
    main()
