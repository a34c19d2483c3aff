"""The bundled suites travel inside the wheel as package data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_contains_every_suite_file(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    names = set(zipfile.ZipFile(next(tmp_path.glob("hitrate-*.whl"))).namelist())
    suites = ROOT / "evals" / "suites"
    files = [p for p in suites.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert len(files) > 100
    missing = [str(p.relative_to(ROOT)) for p in files if f"hitrate/{p.relative_to(ROOT)}" not in names]
    assert not missing
