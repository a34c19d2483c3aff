"""Package discovery for the one-namespace layout: every folder with an `__init__.py` under a
component folder at the repository root is the package `hitrate.<component>[.<sub>...]`.

pyproject.toml holds everything else; setuptools cannot map root folders into a namespace by
discovery alone, so the mapping is computed here (a new sub-package needs no listing). Eval task
workspaces under `evals/suites/` are package data, not packages.
"""

from pathlib import Path

from setuptools import setup

COMPONENTS = ("harness", "projection", "engine", "tools", "store", "tui", "evals")


def _packages() -> dict[str, str]:
    found: dict[str, str] = {}
    for component in COMPONENTS:
        for init in sorted(Path(component).rglob("__init__.py")):
            folder = init.parent
            if "__pycache__" in folder.parts or folder.parts[:2] == ("evals", "suites"):
                continue
            found["hitrate." + ".".join(folder.parts)] = folder.as_posix()
    return found


PACKAGES = _packages()
setup(packages=sorted(PACKAGES), package_dir=PACKAGES)
