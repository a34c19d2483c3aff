"""Fixtures for the harness tests: a ledger file, a workspace, and the recording fake LLM server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_llm_server import FakeLLMServer  # noqa: E402

from hitrate.store.ledger import Ledger  # noqa: E402


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
