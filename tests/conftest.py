"""Fixtures for every test: nothing reads or writes the user's own ledger or config."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # A command run without --db opens the default ledger in the user data directory; a test must
    # never touch the real one (nor see a newer schema another checkout wrote there).
    home = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("HITRATE_DB", str(home / "ledger.db"))
    monkeypatch.setenv("HITRATE_CONFIG", str(home / "config.toml"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
