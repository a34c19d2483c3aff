"""`hitrate ledger-merge OUT IN...`: one ledger from the ledgers of several machines."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hitrate.harness.cli import add_command


def register(app: typer.Typer) -> None:
    add_command(app, "ledger-merge", merge_command)


def merge_command(
    output: Annotated[Path, typer.Argument(help="The merged ledger (created when missing; rows already in it are kept).")],
    inputs: Annotated[list[Path], typer.Argument(help="Ledgers to merge in (read only, never modified).")],
) -> None:
    """Merge ledgers into OUTPUT, e.g. the shards of one eval run from several machines.

    The shards come from `hitrate eval --run-id ... --shard i/n`. Rows are united by their unique
    ids: merging again adds nothing."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from hitrate.evals.merge import MergeError, merge_ledgers
    from hitrate.store.ledger_schema import LedgerVersionError

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # piped output: no wrapping mid-path
    try:
        result = merge_ledgers(output, list(inputs))
    except (MergeError, LedgerVersionError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2)
    table = Table(title=f"merged {len(result.inputs)} ledger(s) into {result.output}", title_justify="left")
    for column in ("table", "added", "updated", "conflicts"):
        table.add_column(column, justify="left" if column == "table" else "right")
    for name, counts in result.tables.items():
        table.add_row(name, str(counts.added), str(counts.updated), str(counts.conflicts))
    console.print(table)
    conflicts = sum(c.conflicts for c in result.tables.values())
    if conflicts:
        console.print(f"[yellow]{conflicts} row(s) share an id with a different row already in {output}; the existing rows were kept[/yellow]")
