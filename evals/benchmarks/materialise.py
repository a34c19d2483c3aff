"""Convert a benchmark into a folder of hitrate tasks once, keyed by what the conversion read.

The folder lives under the user cache (`$HITRATE_SUITE_CACHE` overrides it) and is named after
the benchmark, the source and a digest of the source's files (paths, sizes, modification times),
the repositories folder and the converter's version: the same input gives the same folder, so a
resumed run finds the tasks it started with, and an edited benchmark gets a fresh conversion.
Instances that could not be converted are listed in `_unavailable.json` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs
import tomlkit

CONVERTER_VERSION = "8"
UNAVAILABLE_FILE = "_unavailable.json"
_SKIP_DIRS = {".git", "target", "node_modules", "build", "__pycache__", ".pytest_cache"}


class BenchmarkError(ValueError):
    """A benchmark source that cannot be read (wrong path, malformed file); the message says why."""


Converter = Callable[[Path, Path, "Path | None"], dict[str, str]]
"""convert(source, out_dir, repos) writes one task folder per instance under out_dir and returns
{task id: reason} for the instances it could not convert."""


def cache_root() -> Path:
    override = os.environ.get("HITRATE_SUITE_CACHE")
    return Path(override) if override else Path(platformdirs.user_cache_dir("hitrate", appauthor=False)) / "suites"


def _fingerprint(path: Path, digest: "hashlib._Hash") -> None:
    if path.is_file():
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        return
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            full = Path(root) / name
            stat = full.stat()
            digest.update(f"{full.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())


def materialise(kind: str, source: Path, convert: Converter, *, repos: Path | None = None) -> Path:
    if not source.exists():
        raise BenchmarkError(f"{kind} source {source} does not exist")
    digest = hashlib.sha256(f"{kind}\0{CONVERTER_VERSION}\0{source}\0{repos}\n".encode())
    _fingerprint(source, digest)
    if repos is not None and repos.is_dir():
        for child in sorted(repos.iterdir()):
            # A repository's HEAD moving changes what base commits resolve to only via new
            # objects; the entry's own stamp is enough to notice a re-clone.
            stat = child.stat()
            digest.update(f"{child.name}\0{stat.st_mtime_ns}\n".encode())
    name = f"{kind}-{source.stem or source.name}-{digest.hexdigest()[:12]}"
    target = cache_root() / name
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        unavailable = convert(source, building, repos)
        (building / UNAVAILABLE_FILE).write_text(json.dumps(unavailable, indent=1, sort_keys=True), encoding="utf-8")
        try:
            building.rename(target)
        except OSError:
            if not target.is_dir():  # not a concurrent conversion that finished first
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def write_task_toml(task_dir: Path, spec: dict[str, Any]) -> None:
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "task.toml").write_text(tomlkit.dumps(spec), encoding="utf-8")


def copy_file(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
