"""Which Rust crates cargo can get offline here, and from where.

Graded Rust exercises build `--offline`, so a crate must already be on the machine, in one of:

- cargo's registry cache (`$CARGO_HOME/registry/cache/<registry>/<name>-<version>.crate`), filled
  by earlier online builds;
- Debian's packaged crates (`apt-get install librust-<name>-dev` puts their sources in
  /usr/share/cargo/registry), which cargo uses when the grading folder's parent carries a
  `.cargo/config.toml` replacing crates.io with that directory (`cargo_config`).

A version fits a manifest's requirement by Cargo's default (caret) rule: `"0.5"` takes 0.5.x,
not 0.10; `"1.0"` takes any 1.x.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

DEBIAN_REGISTRY = Path("/usr/share/cargo/registry")
_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def cargo_home() -> Path:
    return Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")


def _numbers(text: str) -> tuple[int, ...] | None:
    found = _VERSION.match(text.strip())
    return tuple(int(part) for part in found.groups() if part is not None) if found else None


def fits(requirement: str, version: str) -> bool:
    """Whether `version` (1.2.3) meets a Cargo requirement: caret (default or `^`), `~`, `=`,
    `*`, and comma-separated `>=` / `<` bounds."""
    have = _numbers(version)
    if have is None:
        return False
    have = (have + (0, 0, 0))[:3]
    for part in [p.strip() for p in requirement.split(",") if p.strip()] or ["*"]:
        if part == "*":
            continue
        operator = re.match(r"^(\^|~|=|>=|<=|>|<)?", part).group(0)
        want = _numbers(part[len(operator):])
        if want is None:
            return False
        padded = (want + (0, 0, 0))[:3]
        if operator in ("", "^"):
            # The first non-zero number of the requirement must match; the rest may grow.
            significant = next((i for i, n in enumerate(want) if n != 0), len(want) - 1)
            if have[: significant + 1] != padded[: significant + 1] or have < padded:
                return False
        elif operator == "~":
            fixed = 2 if len(want) >= 2 else 1
            if have[:fixed] != padded[:fixed] or have < padded:
                return False
        elif operator == "=":
            if have[: len(want)] != want:
                return False
        elif not {">=": have >= padded, ">": have > padded, "<=": have <= padded, "<": have < padded}[operator]:
            return False
    return True


def _versions_in(names: list[str], pattern: str) -> list[str]:
    """Versions out of `<name>-<version>` file or folder names."""
    versions = []
    for entry in names:
        found = re.match(pattern, entry)
        if found:
            versions.append(found.group(1))
    return versions


def cached_versions(name: str) -> list[str]:
    cache = cargo_home() / "registry" / "cache"
    entries = [p.name for p in cache.glob(f"*/{name}-*.crate")] if cache.is_dir() else []
    return _versions_in(entries, rf"^{re.escape(name)}-(\d[^-]*(?:-[A-Za-z][\w.]*)?)\.crate$")


def debian_versions(name: str) -> list[str]:
    entries = [p.name for p in DEBIAN_REGISTRY.glob(f"{name}-*")] if DEBIAN_REGISTRY.is_dir() else []
    return _versions_in(entries, rf"^{re.escape(name)}-(\d[\w.+-]*)$")


def missing_from(crates: dict[str, str], versions_of) -> list[str]:
    return [f"{name} {requirement}" for name, requirement in crates.items()
            if not any(fits(requirement, v) for v in versions_of(name))]  # fmt: skip


def offline_source(crates: dict[str, str]) -> str | None:
    """Where every one of the crates can come from offline: "registry" (cargo's cache, nothing to
    configure), "debian" (the packaged crates), or None."""
    if not missing_from(crates, cached_versions):
        return "registry"
    if not missing_from(crates, debian_versions):
        return "debian"
    return None


def unavailable(crates: dict[str, str]) -> list[str]:
    """The crates (with their requirement) that no offline source here has in a fitting version;
    [] when one source has them all."""
    if offline_source(crates) is not None:
        return []
    from_cache, from_debian = missing_from(crates, cached_versions), missing_from(crates, debian_versions)
    return from_cache if len(from_cache) <= len(from_debian) else from_debian


def cargo_config(crates: dict[str, str]) -> str | None:
    """The `.cargo/config.toml` that points cargo at Debian's packaged crates when those (and
    only those) have every crate; None when nothing needs configuring."""
    if not crates or offline_source(crates) != "debian":
        return None
    return f'[source.crates-io]\nreplace-with = "debian-packages"\n\n[source.debian-packages]\ndirectory = "{DEBIAN_REGISTRY}"\n'
