"""The workspace sandbox policy: which paths a tool may touch, and how non-text files are shown.

Every path a model gives a tool goes through `Sandbox.resolve`. It is resolved against the workspace
root and refused unless the final, symlink-resolved location is still inside that root. The checks
are ordered so that the error names the actual cause (NUL byte, `..`, absolute path, symlink):
a model that is told *why* a path was refused usually fixes its next call.
"""

from __future__ import annotations

import mimetypes
import os
from pathlib import Path
from typing import BinaryIO

from hitrate.tools.beneath import PathChangedError, open_beneath, open_regular_for_reading

# Directories no listing or search descends into: version-control internals, dependency trees,
# virtual environments and tool caches. They are huge, generated, and almost never what the model
# is looking for; walking them would also make results depend on machine-local state.
IGNORED_DIR_NAMES: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".cache",
        ".idea",
        ".eggs",
    }
)

SNIFF_BYTES = 8192

# Magic numbers for the file types an agent most often meets in a repository. Checked before the
# extension because extensions lie (a `.dat` that is really a SQLite database).
_MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "PNG image"),
    (0, b"\xff\xd8\xff", "JPEG image"),
    (0, b"GIF87a", "GIF image"),
    (0, b"GIF89a", "GIF image"),
    (0, b"%PDF-", "PDF document"),
    (0, b"PK\x03\x04", "ZIP archive (also jar, wheel, docx, xlsx)"),
    (0, b"\x1f\x8b", "gzip-compressed data"),
    (0, b"BZh", "bzip2-compressed data"),
    (0, b"\xfd7zXZ\x00", "xz-compressed data"),
    (0, b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (0, b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
    (0, b"\x7fELF", "ELF executable or shared library"),
    (0, b"\xcf\xfa\xed\xfe", "Mach-O binary"),
    (0, b"\xca\xfe\xba\xbe", "Java class file or Mach-O universal binary"),
    (0, b"MZ", "Windows PE executable"),
    (0, b"SQLite format 3\x00", "SQLite database"),
    (0, b"\x00asm", "WebAssembly module"),
    (0, b"\x93NUMPY", "NumPy array (.npy)"),
    (257, b"ustar", "tar archive"),
)


class SandboxError(ValueError):
    """A path or file the sandbox policy refuses; the message is written for the model to read."""


def _within(path: Path, root: Path) -> bool:
    # A prefix test on the parts: linear in the path's length (`root in path.parents` builds every
    # parent and is quadratic, which a path of a few hundred thousand '/a' made take minutes).
    parts = root.parts
    return path.parts[: len(parts)] == parts


class Sandbox:
    """Resolves model-supplied paths inside one workspace root and refuses everything else."""

    def __init__(self, root: str | os.PathLike[str], alias: str | None = None) -> None:
        given = Path(os.path.abspath(os.fspath(root)))
        real = Path(os.path.realpath(given))
        if not real.is_dir():
            raise SandboxError(f"workspace {os.fspath(root)!r} is not a directory")
        self._root_given = given
        self.root = real
        # Where the workspace is mounted inside a task's container (/app): the shell and the task's
        # instruction name files by that path, so the file tools take it too.
        self._alias = Path(os.path.normpath(alias)) if alias and os.path.isabs(alias) and alias != "/" else None

    def resolve(self, path: str) -> Path:
        """Return the real, absolute location of `path`, or raise SandboxError saying why not.

        Relative paths are taken from the workspace root. An absolute path is accepted only if it
        already points inside the workspace (models often echo back absolute paths they saw).
        The returned path has every symlink resolved, so callers operate on what was checked.
        """
        if not isinstance(path, str):
            raise SandboxError(f"path must be a string, got {type(path).__name__}")
        if "\x00" in path:
            raise SandboxError("path contains a NUL byte; paths must be plain text")
        if not path.strip():
            raise SandboxError("path is empty; give a path relative to the workspace root")
        raw = Path(path)
        if raw.is_absolute():
            lexical = Path(os.path.normpath(raw))
            if self._alias is not None and _within(lexical, self._alias):
                lexical = self.root / lexical.relative_to(self._alias)
            elif _within(lexical, self._root_given) and not _within(lexical, self.root):
                lexical = self.root / lexical.relative_to(self._root_given)
            if not _within(lexical, self.root):
                raise SandboxError(
                    f"absolute path {path!r} is outside the workspace; "
                    "use a path relative to the workspace root"
                )
        else:
            lexical = Path(os.path.normpath(self.root / raw))
            if not _within(lexical, self.root):
                raise SandboxError(
                    f"path {path!r} escapes the workspace through '..'; "
                    "only paths inside the workspace are allowed"
                )
        real = Path(os.path.realpath(lexical))
        if not _within(real, self.root):
            raise SandboxError(
                f"path {path!r} goes through a symlink that points outside the workspace; refusing it"
            )
        return real

    def _relative(self, path: Path) -> Path:
        rel = path.relative_to(self.root)
        if not rel.parts:
            raise SandboxError("the workspace root is a directory; give a file path")
        return rel

    def open_read(self, path: Path) -> tuple[BinaryIO, os.stat_result]:
        """Open a resolved regular file for reading without following links (see `beneath`)."""
        try:
            fd, info = open_regular_for_reading(self.root, self._relative(path))
        except PathChangedError as exc:
            raise SandboxError(
                f"{self.display(path)} changed while it was being opened ({exc.strerror}); refusing it"
            ) from exc
        return os.fdopen(fd, "rb"), info

    def read_bytes(self, path: Path) -> bytes:
        handle, _info = self.open_read(path)
        with handle:
            return handle.read()

    def write_bytes(self, path: Path, data: bytes) -> None:
        """Create or truncate a resolved file and write `data`, creating missing folders, without
        following links; `.git` internals are refused."""
        self.refuse_git_internals(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        try:
            fd = open_beneath(self.root, self._relative(path), flags, 0o666, make_parents=True)
        except PathChangedError as exc:
            raise SandboxError(
                f"{self.display(path)} changed while it was being opened ({exc.strerror}); refusing it"
            ) from exc
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)

    def refuse_git_internals(self, path: Path) -> None:
        """Refuse a change inside a `.git` folder: `.git/config` (core.fsmonitor, core.hooksPath,
        filters) and `.git/hooks/*` run programs the next time anyone runs git in the repository."""
        if ".git" in path.relative_to(self.root).parts:
            raise SandboxError(
                f"{self.display(path)} is inside .git; git's internals are read-only to the agent "
                "(use git commands through shell to change the repository)"
            )

    def display(self, path: Path) -> str:
        """The workspace-relative, '/'-separated form of a resolved path ('.' for the root)."""
        rel = path.relative_to(self.root)
        text = rel.as_posix()
        return text if text else "."


def looks_binary(sample: bytes) -> bool:
    """True when a file's leading bytes are not text worth showing to a model.

    A NUL byte is the signal git and ripgrep use. Beyond that, a sample dominated by control
    characters is binary even without NULs; invalid UTF-8 alone is not (Latin-1 source files exist,
    and are shown with replacement characters instead).
    """
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    allowed = {9, 10, 12, 13, 27, 8}
    controls = sum(1 for byte in sample if byte < 32 and byte not in allowed)
    return controls / len(sample) > 0.3


def sniff(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(SNIFF_BYTES)


def guess_type(path: Path, sample: bytes) -> str:
    """A short human description of a non-text file's type, from magic bytes, then extension."""
    for offset, magic, label in _MAGIC:
        if sample[offset : offset + len(magic)] == magic:
            return label
    if sample[:4] == b"RIFF" and sample[8:12] == b"WEBP":
        return "WebP image"
    mime, _ = mimetypes.guess_type(path.name)
    if mime:
        return mime
    if path.suffix == ".pyc":
        return "compiled Python bytecode"
    return "unknown binary data"


def describe_binary(display_path: str, path: Path, sample: bytes, size: int | None = None) -> str:
    """What read tools return for a binary file instead of its bytes."""
    if size is None:
        size = path.stat().st_size
    return (
        f"{display_path}: binary file, {size:,} bytes, looks like {guess_type(path, sample)}; "
        "contents not shown"
    )
