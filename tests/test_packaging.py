"""The built wheel must contain every package folder of every component."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ["harness", "projection", "engine", "tools", "store", "tui", "evals"]


def _package_folders() -> set[str]:
    """Every folder under a component that holds Python modules, as a `hitrate.*` dotted name."""
    found: set[str] = set()
    for component in COMPONENTS:
        base = ROOT / component
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            # Eval task workspaces are data (shipped as package data), not hitrate packages.
            if init.relative_to(ROOT).parts[:2] == ("evals", "suites"):
                continue
            rel = init.parent.relative_to(ROOT)
            found.add("hitrate." + ".".join(rel.parts))
    return found


def test_every_component_is_a_package() -> None:
    assert {f"hitrate.{c}" for c in COMPONENTS} <= _package_folders()


@pytest.mark.slow
def test_wheel_contains_every_package_folder(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("hitrate-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    in_wheel = {"hitrate." + ".".join(Path(n).parent.parts[1:]) for n in names if n.endswith("/__init__.py")}
    in_wheel = {n.rstrip(".") for n in in_wheel}
    missing = _package_folders() - in_wheel
    assert not missing, f"package folders missing from the wheel (see setup.py): {sorted(missing)}"
    # Data files the components need at run time travel with the wheel too.
    for pattern in ("*.json", "*.j2", "*.tcss", "*.c"):
        for path in ROOT.glob(f"*/**/{pattern}"):
            if path.parts[len(ROOT.parts)] not in COMPONENTS or "__pycache__" in path.parts:
                continue
            rel = "hitrate/" + str(path.relative_to(ROOT))
            assert rel in names, f"{rel} is not in the wheel"
