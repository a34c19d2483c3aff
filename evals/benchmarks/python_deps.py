"""What a Python repository needs installed to run its tests, read from every place Python projects
declare it, and which of those distributions are not installed here.

Read (no code of the repository runs): `pyproject.toml` ([project] dependencies and its test
extras), `setup.py` (the `install_requires` / `extras_require` literals passed to `setup()`, module
constants included), `setup.cfg` ([options] and [options.extras_require]), `requirements.txt` and
test requirement files, and `tox.ini` ([testenv] deps and extras). A test extra is one whose name
says so (test, tests, testing) or one tox installs. Requirements whose environment markers do not
hold on this interpreter are left out.
"""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

_TEST_EXTRA = re.compile(r"^tests?$|^testing$|^test[-_]")
_REQUIREMENT_FILES = ("requirements.txt", "requirements-test.txt", "requirements_test.txt", "requirements-tests.txt",
                      "test-requirements.txt", "test_requirements.txt", "requirements/test.txt", "requirements/tests.txt",
                      "requirements/testing.txt", "tests/requirements.txt")  # fmt: skip


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _requirement_lines(text: str, root: Path, seen: set[Path]) -> list[str]:
    """Requirement strings of a requirements file or a tox `deps` value; `-r other.txt` is followed
    inside the repository, other options and tox substitutions are skipped."""
    found: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or "{" in line:
            continue
        if line.startswith(("-r", "--requirement")):
            target = (root / line.split(None, 1)[-1].removeprefix("-r").removeprefix("--requirement").strip()).resolve()
            if target not in seen and root.resolve() in target.parents and (body := _read(target)) is not None:
                seen.add(target)
                found.extend(_requirement_lines(body, target.parent, seen))
            continue
        if not line.startswith("-"):
            found.append(line)
    return found


def _setup_py(root: Path) -> tuple[list[str], dict[str, list[str]]]:
    """The literal install_requires and extras_require given to setup(), through module constants
    (`extras_require=EXTRAS_REQUIRE`)."""
    text = _read(root / "setup.py")
    if text is None:
        return [], {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [], {}
    constants: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            constants[node.targets[0].id] = node.value

    def literal(node: ast.expr | None) -> object:
        if isinstance(node, ast.Name) and node.id in constants:
            node = constants[node.id]
        try:
            return ast.literal_eval(node) if node is not None else None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None

    requires: list[str] = []
    extras: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "setup":
            for keyword in node.keywords:
                value = literal(keyword.value)
                if keyword.arg in ("install_requires", "tests_require") and isinstance(value, (list, tuple)):
                    requires.extend(str(v) for v in value)
                elif keyword.arg == "extras_require" and isinstance(value, dict):
                    extras.update({str(k): [str(v) for v in vs] for k, vs in value.items() if isinstance(vs, (list, tuple))})
    return requires, extras


def _setup_cfg(root: Path) -> tuple[list[str], dict[str, list[str]]]:
    text = _read(root / "setup.cfg")
    if text is None:
        return [], {}
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return [], {}
    requires = _requirement_lines(parser.get("options", "install_requires", fallback=""), root, set())
    requires += _requirement_lines(parser.get("options", "tests_require", fallback=""), root, set())
    extras = {}
    if parser.has_section("options.extras_require"):
        extras = {name: _requirement_lines(value, root, set()) for name, value in parser.items("options.extras_require")}
    return requires, extras


def _pyproject(root: Path) -> tuple[list[str], dict[str, list[str]]]:
    text = _read(root / "pyproject.toml")
    if text is None:
        return [], {}
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return [], {}
    extras = project.get("optional-dependencies", {})
    return [str(r) for r in project.get("dependencies", [])], {str(k): [str(r) for r in v] for k, v in extras.items() if isinstance(v, list)}


def _tox(root: Path) -> tuple[list[str], set[str]]:
    """tox's [testenv] deps and the extras it installs."""
    text = _read(root / "tox.ini")
    if text is None:
        return [], set()
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return [], set()
    if not parser.has_section("testenv"):
        return [], set()
    deps = _requirement_lines(parser.get("testenv", "deps", fallback=""), root, set())
    extras = {e.strip() for e in re.split(r"[,\s]+", parser.get("testenv", "extras", fallback="")) if e.strip() and "{" not in e}
    # `.[tests]` in deps names the project's own extras.
    for dep in list(deps):
        if dep.startswith(".["):
            extras.update(e.strip() for e in dep[2:].rstrip("]").split(","))
            deps.remove(dep)
    return deps, extras


def declared_test_requirements(root: Path) -> list[str]:
    """Requirement strings the repository declares for running its tests."""
    requires: list[str] = []
    extras: dict[str, list[str]] = {}
    for read in (_pyproject, _setup_py, _setup_cfg):
        more, more_extras = read(root)
        requires += more
        for name, items in more_extras.items():
            extras.setdefault(name, []).extend(items)
    tox_deps, tox_extras = _tox(root)
    requires += tox_deps
    for name, items in extras.items():
        if _TEST_EXTRA.match(name.lower()) or name in tox_extras:
            requires += items
    for rel in _REQUIREMENT_FILES:
        if (text := _read(root / rel)) is not None:
            requires += _requirement_lines(text, (root / rel).parent, set())
    return requires


def missing_distributions(root: Path) -> list[str]:
    """Distributions the repository declares for its tests that are not installed here, in the
    order first declared."""
    missing: dict[str, str] = {}
    for text in declared_test_requirements(root):
        try:
            requirement = Requirement(text)
            applies = requirement.marker is None or requirement.marker.evaluate({"extra": ""})
        except (InvalidRequirement, InvalidMarker):
            continue
        key = canonicalize_name(requirement.name)
        if not applies or key in missing or requirement.url:
            continue
        try:
            metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            missing[key] = requirement.name
    return list(missing.values())
