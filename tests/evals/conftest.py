"""Fixtures for the eval tests."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from evals_task_factory import write_task


@pytest.fixture
def make_task(tmp_path: Path) -> Callable[..., Path]:
    suite = tmp_path / "suite"
    suite.mkdir()

    def make(task_id: str = "fix-add", **kwargs: object) -> Path:
        return write_task(suite, task_id, **kwargs)  # type: ignore[arg-type]

    return make
