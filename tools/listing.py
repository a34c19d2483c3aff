"""list_dir and glob, plus the sorted workspace walk and glob matching that grep shares."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

from pydantic import Field

from hitrate.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolResult
from hitrate.tools.linear_regex import LinearRegexError, Pattern, compile_linear
from hitrate.tools.sandbox import IGNORED_DIR_NAMES


def walk_files(base: Path) -> Iterator[Path]:
    """Regular files under `base`, depth first, entries of each folder in name order.

    This is the order `rg --sort path` produces, so grep gives the same results with or without
    ripgrep. Symlinks are not followed (a link may point outside the workspace, or loop), and
    ignored folders are not entered.
    """
    try:
        entries = sorted(os.scandir(base), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in IGNORED_DIR_NAMES:
                yield from walk_files(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")  # '**/' : zero or more whole folders
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            close = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if close == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : close]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = close
        elif char == "{":
            close = pattern.find("}", i)
            if close == -1:
                out.append(re.escape(char))
            else:
                options = pattern[i + 1 : close].split(",")
                out.append("(?:" + "|".join(_translate(option) for option in options) + ")")
                i = close
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def glob_regex(pattern: str) -> Pattern:
    """Compile a glob: '*' and '?' stay inside one folder, '**/' spans folders, '{a,b}' alternates.
    RE2 runs it in time linear in the path, however many '*'s the glob has; match with fullmatch."""
    try:
        return compile_linear(_translate(pattern))
    except LinearRegexError as exc:
        raise ToolError(f"invalid glob {pattern!r}: {exc}") from exc


class PathFilter:
    """A ripgrep-style `--glob`: without '/' it matches file names at any depth; '!' negates."""

    def __init__(self, glob: str) -> None:
        self.negate = glob.startswith("!")
        body = glob[1:] if self.negate else glob
        self.by_name = "/" not in body
        self.regex = glob_regex(body.lstrip("/"))

    def accepts(self, rel_path: str) -> bool:
        subject = rel_path.rsplit("/", 1)[-1] if self.by_name else rel_path
        return bool(self.regex.fullmatch(subject)) != self.negate


class ListDirArgs(ToolArgs):
    path: str = Field(default=".", description="Folder to list, relative to the workspace root.")


class ListDirTool(Tool[ListDirArgs]):
    name = "list_dir"
    description = (
        "List one folder of the workspace, sorted by name: folders end with '/', symlinks with '@', "
        "files show their size. Version-control and dependency folders (.git, node_modules, ...) "
        "are left out. Use glob to find files at any depth."
    )
    args_model = ListDirArgs

    def run(self, args: ListDirArgs, ctx: ToolContext) -> ToolResult:
        sandbox = ctx.sandbox
        target = sandbox.resolve(args.path)
        shown = sandbox.display(target)
        if not target.exists():
            raise ToolError(f"folder not found: {shown}")
        if not target.is_dir():
            raise ToolError(f"{shown} is a file, not a folder; use read_file to read it")
        lines: list[str] = []
        hidden: list[str] = []
        for entry in sorted(os.scandir(target), key=lambda item: item.name):
            if entry.is_symlink():
                lines.append(entry.name + "@")
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in IGNORED_DIR_NAMES:
                    hidden.append(entry.name + "/")
                else:
                    lines.append(entry.name + "/")
            else:
                lines.append(f"{entry.name} ({entry.stat(follow_symlinks=False).st_size:,} bytes)")
        total = len(lines)
        cap = ctx.limits.list_max_entries
        body = lines[:cap]
        if total > cap:
            body.append(f"[{total - cap} more entries not shown]")
        if hidden:
            body.append("[not listed: " + ", ".join(hidden) + "]")
        if not lines and not hidden:
            body = [f"{shown} is empty"]
        return ToolResult(
            content="\n".join(body),
            metadata={"path": shown, "entries": total, "truncated": total > cap},
        )


class GlobArgs(ToolArgs):
    pattern: str = Field(
        description=(
            "Glob matched against file paths relative to `path`: '*' and '?' stay within one folder, "
            "'**/' spans any number of folders, '{a,b}' matches either. Example: 'src/**/*.{py,pyi}'."
        )
    )
    path: str = Field(default=".", description="Folder to search from, relative to the workspace root.")


class GlobTool(Tool[GlobArgs]):
    name = "glob"
    description = (
        "Find files whose path matches a glob pattern, sorted by path. Version-control and dependency "
        "folders (.git, node_modules, ...) are skipped and symlinks are not followed."
    )
    args_model = GlobArgs

    def run(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        sandbox = ctx.sandbox
        if not args.pattern.strip():
            raise ToolError("pattern is empty; for example '**/*.py' finds every Python file")
        if args.pattern.startswith("/") or "\x00" in args.pattern:
            raise ToolError("pattern must be relative to `path` (no leading '/')")
        base = sandbox.resolve(args.path)
        shown_base = sandbox.display(base)
        if not base.is_dir():
            raise ToolError(f"folder not found: {shown_base}")
        regex = glob_regex(args.pattern)
        cap = ctx.limits.list_max_entries
        found: list[str] = []
        total = 0
        for file in walk_files(base):
            if regex.fullmatch(file.relative_to(base).as_posix()):
                total += 1
                if len(found) < cap:
                    found.append(sandbox.display(file))
        if not found:
            return ToolResult(
                content=f"no files match {args.pattern!r} under {shown_base}",
                metadata={"matches": 0, "truncated": False},
            )
        body = "\n".join(found)
        if total > cap:
            body += f"\n[showing {cap} of {total} files; narrow the pattern or path]"
        return ToolResult(content=body, metadata={"matches": total, "truncated": total > cap})
