"""The ledger's file on disk: where it lives, private modes, a read-only connection for commands that
only read, and why a file could not be opened.

The ledger holds whole transcripts (every prompt, file and command output a session saw), so it
is created 0600 in a 0700 folder, as ssh keeps `~/.ssh`. A ledger file this user owns that is
looser (an older hitrate created it 0644) is tightened when opened, and so is hitrate's own data
folder; a folder the user chose (`--db ~/work/runs.db`) keeps its mode. SQLite creates the `-wal`
and `-shm` files with the database file's mode (https://www.sqlite.org/tempfiles.html), so they
follow.

Commands that only read (`ledger`, `report`, `whatif`) also work where the file or its folder is
read-only (an archived run, a shared mount): SQLite's `mode=ro`, and, where the folder cannot hold
the WAL index either, `immutable=1` (https://www.sqlite.org/wal.html#readonly). Such a connection
migrates nothing: an older schema is reported as needing one.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

import platformdirs

FILE_MODE = 0o600
FOLDER_MODE = 0o700
SIDE_FILES = ("-wal", "-shm", "-journal")


def own_data_folder() -> Path:
    """hitrate's data folder (the default ledger's), which hitrate keeps private."""
    return Path(platformdirs.user_data_dir("hitrate", appauthor=False))


def _tighten(path: Path, mode: int) -> None:
    """chmod `path` to `mode` when this user owns it and it grants more; best effort (a read-only
    file system or a file owned by someone else is left as it is)."""
    try:
        info = path.lstat()
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        return
    if stat.S_IMODE(info.st_mode) & ~mode:
        try:
            path.chmod(stat.S_IMODE(info.st_mode) & mode)
        except OSError:
            pass


def make_private(path: Path) -> None:
    """Create the ledger's folder (0700) and an empty file (0600) if missing; tighten an existing
    file (and its side files) this user owns, and hitrate's own data folder."""
    folder = path.parent
    if not folder.exists():
        folder.mkdir(parents=True, mode=FOLDER_MODE)
    elif folder.resolve() == own_data_folder().resolve():
        _tighten(folder, FOLDER_MODE)
    if not path.exists():
        try:
            # O_EXCL: another process creating it at the same moment keeps its own file.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        except FileExistsError:
            pass
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in SIDE_FILES)):
        _tighten(candidate, FILE_MODE)


def writable(path: Path) -> bool:
    """Whether this process could write the ledger: the file (or, when missing, its folder) and
    the folder, which holds the WAL file."""
    folder = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        return False
    return not folder.exists() or os.access(folder, os.W_OK)


def connect_read_only(path: Path, *, timeout_s: float) -> sqlite3.Connection:
    """A connection that cannot write `path`. `mode=ro` where SQLite can keep the WAL index next
    to the file; `immutable=1` where the folder is read-only and no WAL file is there (no other
    process can be writing then: a writer would need that folder too)."""
    if not path.is_file():
        raise FileNotFoundError(path)
    uri = f"file:{quote(str(path.resolve()))}"
    folder_writable = os.access(path.parent, os.W_OK)
    wal = path.with_name(path.name + "-wal")
    mode = "mode=ro" if folder_writable or wal.exists() else "mode=ro&immutable=1"
    # check_same_thread=False: shared by the process's threads under the ledger's lock.
    return sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=timeout_s, isolation_level=None, check_same_thread=False)


ENV_DB = "HITRATE_DB"


def open_failure(path: Path, exc: sqlite3.DatabaseError) -> str:
    """A user-facing reason why `path` could not be opened as a ledger."""
    text = str(exc)
    if "not a database" in text:
        return f"{path} is not a SQLite ledger file ({text})"
    if "readonly" in text or "unable to open" in text:
        return f"cannot write ledger {path}: {text} (check the path and its permissions)"
    return f"cannot open ledger {path}: {text}"


def default_ledger_path() -> Path:
    """`$HITRATE_DB` if set, else `ledger.db` in the user data directory
    (e.g. ~/.local/share/hitrate/ledger.db on Linux)."""
    env = os.environ.get(ENV_DB)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("hitrate", appauthor=False)) / "ledger.db"
