"""Fixtures for the whole suite."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_default_ledger(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run without --db write to $HITRATE_DB: point it at a file of this test's own, so
    no test reads or writes the user's real ledger (which another hitrate version may own)."""
    monkeypatch.setenv("HITRATE_DB", str(Path(tmp_path_factory.mktemp("default-ledger")) / "ledger.db"))
