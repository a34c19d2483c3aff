"""Fixtures for the harness tests: a ledger file, a workspace, and the recording fake LLM server."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_llm_server import FakeLLMServer

from hitrate.store.ledger import Ledger


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger(tmp_path / "ledger.db") as db:
        yield db


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "AGENTS.md").write_text("Run `python -c 'import calc'` to check.\n")
    return ws


@pytest.fixture
def fake_server():
    server = FakeLLMServer().start()
    yield server
    server.stop()
