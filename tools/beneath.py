"""Open files beneath the workspace root without following a link the check did not see.

`Sandbox.resolve` checks a path, but a check followed by `open(path)` is a race: between the two, a
process the model started can swap a folder for a symlink to `/etc` (a red-team run escaped after
191 tries for reading, 310 for writing). So every file tool opens what was checked one component
at a time, from a handle on the workspace root, each step with `O_NOFOLLOW` (`openat` in C,
`os.open(..., dir_fd=...)` here). A component that became a symlink makes the open fail instead of
leaving the workspace. The resolved path has every legitimate in-workspace symlink expanded
already, so refusing links while opening costs nothing.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class PathChangedError(OSError):
    """A component of a checked path was replaced (by a symlink or a non-folder) before it was opened."""


def _step(name: str, dir_fd: int, *, create: bool) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, 0o777, dir_fd=dir_fd)
        except FileExistsError:
            pass
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_beneath(root: Path, relative: Path, flags: int, mode: int = 0o666, *, make_parents: bool = False) -> int:
    """A file descriptor for `root/relative`, opened without following any symlink on the way.

    `relative` must be a plain relative path (no `..`). `flags` are `os.open` flags for the last
    component; `O_NOFOLLOW` and `O_CLOEXEC` are always added. With `make_parents`, missing folders
    are created as the walk goes (each also without following links). Raises PathChangedError when
    a component is a symlink or not a folder, other OSErrors as `os.open` does.
    """
    parts = relative.parts
    if not parts or any(part in ("..", "/") for part in parts) or relative.is_absolute():
        raise ValueError(f"not a plain relative path: {relative}")
    dir_fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                next_fd = _step(part, dir_fd, create=make_parents)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(part, dir_fd):
                    raise PathChangedError(exc.errno, f"{part} became a symlink") from exc
                raise
            os.close(dir_fd)
            dir_fd = next_fd
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathChangedError(exc.errno, f"{parts[-1]} became a symlink") from exc
            raise
    finally:
        os.close(dir_fd)


def open_regular_for_reading(root: Path, relative: Path) -> tuple[int, os.stat_result]:
    """Open a regular file for reading, beneath root; (fd, its stat). FIFOs and devices are refused
    from the descriptor's own stat (opened non-blocking, so a FIFO cannot hang the open)."""
    fd = open_beneath(root, relative, os.O_RDONLY | _NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file") if stat.S_ISDIR(info.st_mode) else OSError(
                errno.EINVAL, "not a regular file (device, socket or pipe)"
            )
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return fd, info
    except BaseException:
        os.close(fd)
        raise
