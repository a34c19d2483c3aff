"""Build caches and packages shared by grading runs, never written by the code under test.

A Go exercise graded in a fresh folder with an empty GOCACHE rebuilds the vet facts and test
support of the standard library it imports: 6-8 s of a run that otherwise takes 1-2 s. Sharing one
GOCACHE folder between runs would let one graded solution's tests rewrite what the next run links
(Go trusts its cache's entries), so the shared cache is warmed once by hitrate itself, on a test
file of its own that imports the standard packages exercises use, and each grading run starts
from a copy of it (a few MB) inside its own folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import platformdirs

# The standard packages Exercism's Go exercises and their tests import (and a few neighbours).
_GO_PACKAGES = (
    "bufio", "bytes", "container/list", "crypto/rand", "encoding/json", "errors", "fmt", "io", "log", "math",
    "math/big", "math/rand", "os", "reflect", "regexp", "runtime", "sort", "strconv", "strings", "sync",
    "sync/atomic", "time", "unicode", "unicode/utf8",
)  # fmt: skip
_WARM_TIMEOUT_S = 600


def cache_root() -> Path:
    override = os.environ.get("HITRATE_BUILD_CACHE")
    return Path(override) if override else Path(platformdirs.user_cache_dir("hitrate", appauthor=False)) / "build-caches"


def _go_env() -> dict[str, str]:
    keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return {**keep, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CGO_ENABLED": os.environ.get("CGO_ENABLED", "1")}


def _go_version() -> str | None:
    try:
        done = subprocess.run(["go", "env", "GOVERSION", "GOROOT"], capture_output=True, text=True, timeout=60, env=_go_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or not lines:
        return None
    # One cache per toolchain: its version and where it lives (two installs of one version differ).
    return f"{lines[0]}-{hashlib.sha256(' '.join(lines).encode()).hexdigest()[:8]}"


def _warm_go(folder: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="hitrate-go-warm-") as tmp:
        module = Path(tmp) / "warm"
        module.mkdir()
        (module / "go.mod").write_text("module warm\n\ngo 1.18\n", encoding="utf-8")
        (module / "warm.go").write_text("package warm\n", encoding="utf-8")
        imports = "".join(f'\t_ "{name}"\n' for name in _GO_PACKAGES)
        (module / "warm_test.go").write_text(
            f'package warm\n\nimport (\n{imports}\t"testing"\n)\n\nfunc TestWarm(t *testing.T) {{}}\n', encoding="utf-8"
        )
        env = {**_go_env(), "GOCACHE": str(folder), "GOPATH": str(Path(tmp) / "gopath"), "TMPDIR": tmp}
        subprocess.run(["go", "test", "./..."], cwd=module, env=env, capture_output=True, timeout=_WARM_TIMEOUT_S, check=True)


WARMERS = {"go": (_go_version, _warm_go)}
"""Per cache name: what names the toolchain (None: not usable) and how to warm a cache for it."""


def warmed_cache(name: str) -> Path | None:
    """The folder of the shared cache `name`, warmed on first use (under a lock, so parallel grading
    runs warm it once); None when the toolchain is missing or warming failed."""
    version_of, warm = WARMERS[name]
    version = version_of()
    if version is None:
        return None
    root = cache_root()
    target = root / f"{name}-{version}"
    if target.is_dir():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_dir():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        try:
            warm(staging)
            staging.rename(target)
        except (OSError, subprocess.SubprocessError):
            return None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def seed(name: str, dest: Path) -> bool:
    """Copy the shared cache `name` into `dest` (a grading run's own cache folder); False when there
    is none to copy."""
    source = warmed_cache(name)
    if source is None:
        return False
    shutil.copytree(source, dest, dirs_exist_ok=True)
    return True


# Packages a track's tests need that no toolchain ships, installed once into a shared folder by
# `hitrate suite prepare <name>` (the install needs the package registry; grading never fetches
# anything) and linked read-only into each grading folder. Exercism's JavaScript exercises all
# declare the same devDependencies; these are the ones their tests run with (jest, through babel).
NPM_PACKAGES = {
    "javascript": ("jest@^29.7.0", "babel-jest@^29.6.4", "@babel/core@^7.25.2", "@exercism/babel-preset-javascript@^0.2.1", "core-js@~3.37.1"),
}
_PREPARED_MARKER = {"javascript": "node_modules/jest/bin/jest.js"}


def prepared(name: str) -> Path | None:
    """The node_modules folder of the prepared packages `name`; None when not prepared here."""
    folder = cache_root() / name
    return folder / "node_modules" if (folder / _PREPARED_MARKER[name]).is_file() else None


def prepare(name: str, *, timeout_s: float = 900) -> Path:
    """Install the packages `name` (npm, from its registry) into the shared folder; its
    node_modules. OSError / CalledProcessError say why not."""
    if name not in NPM_PACKAGES:
        raise ValueError(f"nothing to prepare called {name!r}; known: {', '.join(sorted(NPM_PACKAGES))}")
    npm = shutil.which("npm")
    if npm is None:
        raise OSError("npm is not on PATH (install Node.js)")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        (staging / "package.json").write_text('{"private": true}\n', encoding="utf-8")
        subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *NPM_PACKAGES[name]],
                       cwd=staging, check=True, timeout=timeout_s, capture_output=True, text=True)  # fmt: skip
        target = root / name
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target / "node_modules"
