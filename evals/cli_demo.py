"""`hitrate demo`: the offline main job (see hitrate.evals.demo)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from hitrate.harness.cli import add_command, require_extra


def register(app: typer.Typer) -> None:
    add_command(app, "demo", demo_command)


def demo_command(
    db: Annotated[Optional[Path], typer.Option("--db", help="Ledger file (default: $HITRATE_DB or the user data dir).")] = None,
    cache: Annotated[Optional[Path], typer.Option("--cache-dir", help="Where the tiny demo model is built (default: $HITRATE_CACHE_DIR or the user cache dir).")] = None,
    workers: Annotated[int, typer.Option("--workers", "-j", min=1, help="Tasks run at once.")] = 2,
) -> None:
    """Show the prompt cache at work offline, with no key: cache-aware layout against naive layout.

    A fixed subset of the bundled eval suite is replayed through the bundled engine with a tiny
    random-weight model in both layouts, then reported. A caching demonstration, not model
    quality. Exits 1 if a task did not pass."""
    require_extra("local", "hitrate demo (it serves a tiny model with the bundled engine)")
    require_extra("evals", "hitrate demo (it draws the report's pictures)")
    from hitrate.evals.demo import run_demo
    from hitrate.harness.models import ModelSpecError

    try:
        result = run_demo(db=db, cache=cache, workers=workers)
    except ModelSpecError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130)
    raise typer.Exit(0 if result.ok else 1)
