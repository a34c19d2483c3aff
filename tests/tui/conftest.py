"""Fixtures for the TUI tests: a ledger, a workspace, a frozen clock, and apps driven by the real
harness agent with a scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from tui_helpers import SPEC, FrozenClock, fixed_context
from scripted_model import ScriptedRouter

from hitrate.harness.agent import AgentLimits
from hitrate.harness.checkpoints import Checkpoints
from hitrate.store.ledger import Ledger
from hitrate.tui.app import HitrateApp
from hitrate.tui.harness_link import HarnessLink


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger(tmp_path / "ledger.db") as db:
        yield db


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "demo-repo"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return ws


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def make_app(ledger: Ledger, workspace: Path, clock: FrozenClock) -> Callable[..., HitrateApp]:
    """`make_app(scripts, ...)`: an app on a HarnessLink whose router serves scripted models."""
    links: list[HarnessLink] = []

    def make(scripts: dict[str, list[dict[str, Any]]], *, approvals: bool = False, spec: str = SPEC,
             max_steps: int = 10, resume: str | None = None, checkpoints: Checkpoints | None = None) -> HitrateApp:
        router = ScriptedRouter(scripts)
        link = HarnessLink(spec, workspace, ledger.path, router=router, context=fixed_context, clock=clock,
                           limits=AgentLimits(max_steps=max_steps, show_budget=False))
        links.append(link)
        resumed = link.resume(resume) if resume else None
        return HitrateApp(link, approvals=approvals, clock=clock, tick_s=None, workspace=workspace, resumed=resumed,
                          checkpoints=checkpoints)

    yield make
    for link in links:
        link.close()
