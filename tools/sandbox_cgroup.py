"""A cgroup of its own for one sandboxed command: limits on processes and memory for its whole
process tree, where `prlimit` only bounds each process (and RLIMIT_NPROC does not bind root).

Before running the command, a small `/bin/sh` moves itself into a fresh cgroup (writing 0 to its
`cgroup.procs`) and then execs bubblewrap, so every process the command starts is counted there:
`pids.max` stops the 701st fork, `memory.max` (v1: `memory.limit_in_bytes`) stops a command that
spreads its memory over many processes or into its private /tmp (tmpfs pages are charged to the
cgroup that writes them). On cgroup v2 the group is OOM-killed as a whole (`memory.oom.group`) and
swap is off for it. The cgroup is removed when the command has ended.

Which cgroups can be used: cgroup v2 where the folder of hitrate's own cgroup (or the root) has the
`pids`/`memory` controllers enabled for children and can be written (root, or a delegated systemd
scope); otherwise the v1 `pids` and `memory` hierarchies where they can be written (root on a
hybrid system). Where neither can (an unprivileged user without delegation, macOS), `enter()` says
so and commands keep only their per-process limits.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

_MOVE_SELF = 'for f; do [ "$f" = -- ] && { shift; break; }; echo 0 > "$f" || exit 125; shift; done; exec "$@"'
_SHELL = "/bin/sh"


@dataclass
class TreeLimits:
    """What `enter()` set up: the argv prefix that puts a command into the cgroup (empty when none)
    and which kind of cgroup, or why none."""

    prefix: list[str] = field(default_factory=list)
    kind: str = "none"
    detail: str = ""
    folders: list[Path] = field(default_factory=list)


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the hierarchy, file system type, super options) of each cgroup mount."""
    found: list[tuple[str, str, str, set[str]]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        found.append((fields[4], fields[3], tail[0], set(tail[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """hitrate's own cgroup path per controller ("" for the v2 hierarchy)."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _inside(mount: str, root: str, path: str) -> Path:
    """The folder of cgroup `path` under a mount of the hierarchy's `root`."""
    relative = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    return Path(os.path.normpath(os.path.join(mount, relative)))


def _v2_parent(wanted: set[str]) -> Path | None:
    own = _own_paths().get("")
    for mount, root, kind, _options in _mounts():
        if kind != "cgroup2" or own is None:
            continue
        for folder in (_inside(mount, root, own), Path(mount)):
            try:
                enabled = set((folder / "cgroup.subtree_control").read_text().split())
            except OSError:
                continue
            if wanted <= enabled and os.access(folder, os.W_OK):
                return folder
    return None


def _v1_parents(wanted: set[str]) -> dict[str, Path]:
    own = _own_paths()
    found: dict[str, Path] = {}
    for mount, root, kind, options in _mounts():
        for controller in wanted & options:
            if kind == "cgroup" and controller in own and controller not in found:
                folder = _inside(mount, root, own[controller])
                if os.access(folder, os.W_OK):
                    found[controller] = folder
    return found


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@contextlib.contextmanager
def enter(max_processes: int | None, max_memory_bytes: int | None) -> Iterator[TreeLimits]:
    """A fresh cgroup with these limits for the duration of the block (see the module doc)."""
    wanted = {name for name, limit in (("pids", max_processes), ("memory", max_memory_bytes)) if limit is not None}
    limits = TreeLimits()
    if not wanted:
        limits.detail = "no limit asked for"
        yield limits
        return
    name = f"hitrate-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        _create(limits, name, wanted, max_processes, max_memory_bytes)
    except OSError as exc:
        _remove(limits.folders)
        limits = TreeLimits(detail=f"a cgroup could not be set up here ({exc.strerror or exc})")
    try:
        yield limits
    finally:
        _remove(limits.folders)


def _create(limits: TreeLimits, name: str, wanted: set[str], max_processes: int | None,
            max_memory_bytes: int | None) -> None:  # fmt: skip
    parent = _v2_parent(wanted)
    if parent is not None:
        folder = parent / name
        folder.mkdir()
        limits.folders.append(folder)
        if max_processes is not None:
            _write(folder / "pids.max", str(max_processes))
        if max_memory_bytes is not None:
            _write(folder / "memory.max", str(max_memory_bytes))
            for extra, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                if (folder / extra).exists():
                    _write(folder / extra, value)
        limits.kind, limits.detail = "cgroup v2", str(folder)
    else:
        parents = _v1_parents(wanted)
        if set(parents) != wanted:
            missing = ", ".join(sorted(wanted - set(parents)))
            limits.detail = f"no writable cgroup ({missing}) for this user: processes and memory are limited per process only"
            return
        for controller in sorted(wanted):
            folder = parents[controller] / name
            folder.mkdir()
            limits.folders.append(folder)
        by_controller = dict(zip(sorted(wanted), limits.folders))
        if max_processes is not None:
            _write(by_controller["pids"] / "pids.max", str(max_processes))
        if max_memory_bytes is not None:
            memory = by_controller["memory"]
            _write(memory / "memory.limit_in_bytes", str(max_memory_bytes))
            if (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", str(max_memory_bytes))
        limits.kind, limits.detail = "cgroup v1", ", ".join(str(f) for f in limits.folders)
    procs = [str(folder / "cgroup.procs") for folder in limits.folders]
    limits.prefix = [_SHELL, "-c", _MOVE_SELF, "sh", *procs, "--"]


def _remove(folders: list[Path]) -> None:
    for folder in folders:
        for _ in range(40):  # the last processes of the tree may still be exiting
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
