"""read_file and write_file."""

from __future__ import annotations

import difflib
import io
from pathlib import Path
from typing import Iterable

from pydantic import Field, model_validator

from hitrate.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolLimits, ToolResult, refused
from hitrate.tools.diffs import unified_diff
from hitrate.tools.sandbox import SNIFF_BYTES, Sandbox, describe_binary, looks_binary


def require_file(sandbox: Sandbox, target: Path, shown: str) -> None:
    """Raise a ToolError that helps the model find the right path when `target` is no file."""
    if target.is_dir():
        raise ToolError(f"{shown} is a directory, not a file; use list_dir to see what it holds")
    if target.exists() and not target.is_file():
        # FIFOs, sockets and devices: reading one can block forever.
        raise ToolError(f"{shown} is not a regular file (device, socket or pipe); refusing to open it")
    if target.exists():
        return
    message = f"file not found: {shown}"
    parent = target.parent
    if parent.is_dir():
        names = sorted(entry.name for entry in parent.iterdir())
        close = difflib.get_close_matches(target.name, names, n=3, cutoff=0.6)
        if close:
            prefix = sandbox.display(parent)
            shown_close = [name if prefix == "." else f"{prefix}/{name}" for name in close]
            message += "; did you mean " + ", ".join(shown_close) + "?"
    else:
        message += f" (its folder {sandbox.display(parent)!r} does not exist either)"
    raise ToolError(message)


def strip_eol(line: str) -> str:
    """`line` without its line end ('\n' or '\r\n'); any other character is the file's content."""
    if line.endswith("\n"):
        line = line[:-1]
    if line.endswith("\r"):
        line = line[:-1]
    return line


def cut_line(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}… [line cut, {len(text) - max_chars:,} more chars]"


def _page(text: Iterable[str], args: "ReadFileArgs", limits: ToolLimits) -> tuple[int, int, bool, list[str]]:
    """Number the lines of the requested range within the caps: (total lines, last shown, cut, lines)."""
    wanted_end = args.end_line
    out: list[str] = []
    chars = 0
    total = 0
    last_shown = 0
    cut_short = False
    for number, raw in enumerate(text, start=1):
        total = number
        if number < args.start_line or (wanted_end is not None and number > wanted_end):
            continue
        if cut_short:
            continue
        line = f"{number:>6}\t{cut_line(strip_eol(raw), limits.max_line_chars)}"
        if len(out) >= limits.read_max_lines or (out and chars + len(line) + 1 > limits.output_max_chars):
            cut_short = True
            continue
        out.append(line)
        chars += len(line) + 1
        last_shown = number
    return total, last_shown, cut_short, out


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File to read, relative to the workspace root.")
    start_line: int = Field(default=1, ge=1, description="First line to return (1-based).")
    end_line: int | None = Field(
        default=None, ge=1, description="Last line to return (inclusive); omit to read to the end."
    )

    @model_validator(mode="after")
    def _range_is_ordered(self) -> "ReadFileArgs":
        if self.end_line is not None and self.end_line < self.start_line:
            raise ValueError(f"end_line ({self.end_line}) is before start_line ({self.start_line})")
        return self


class ReadFileTool(Tool[ReadFileArgs]):
    name = "read_file"
    description = (
        "Read a text file from the workspace. Lines come back numbered as '<line number><TAB><text>'; "
        "the numbers are not part of the file. Long files are returned in pages: use start_line and "
        "end_line to read a range. Binary files are described, not shown."
    )
    args_model = ReadFileArgs

    def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolResult:
        sandbox = ctx.sandbox
        limits = ctx.limits
        target = sandbox.resolve(args.path)
        shown = sandbox.display(target)
        require_file(sandbox, target, shown)
        try:
            handle, info = sandbox.open_read(target)
        except OSError as exc:
            raise ToolError(f"could not open {shown}: {exc.strerror or exc}") from exc
        with handle:
            size = info.st_size
            sample = handle.read(SNIFF_BYTES)
            if looks_binary(sample):
                return ToolResult(
                    content=describe_binary(shown, target, sample, size),
                    metadata={"path": shown, "binary": True, "size": size},
                )
            if size > limits.read_max_file_bytes:
                raise ToolError(
                    f"{shown} is {size:,} bytes, over the {limits.read_max_file_bytes:,}-byte read cap; "
                    "use grep, or shell with head/sed, to look at parts of it"
                )
            handle.seek(0)
            # Read at most the cap, whatever the size was when checked: a file that grows while
            # it is read (a log being written) must not take the read past it.
            data = handle.read(limits.read_max_file_bytes + 1)
        if len(data) > limits.read_max_file_bytes:
            raise ToolError(
                f"{shown} grew past the {limits.read_max_file_bytes:,}-byte read cap while it was read; "
                "use shell with head/tail to look at parts of it"
            )
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline="")
        total, last_shown, cut_short, out = _page(text, args, limits)

        meta = {"path": shown, "total_lines": total, "start_line": args.start_line, "end_line": last_shown}
        if total == 0:
            return ToolResult(content=f"{shown} is empty (0 lines)", metadata=meta)
        if args.start_line > total:
            raise ToolError(f"start_line {args.start_line} is past the end of {shown}, which has {total} lines")
        body = "\n".join(out)
        if cut_short:
            body += (
                f"\n[showing lines {args.start_line}-{last_shown} of {total}; "
                f"continue with start_line={last_shown + 1}]"
            )
        elif args.start_line > 1 or last_shown < total:
            body += f"\n[lines {args.start_line}-{last_shown} of {total}]"
        meta["truncated"] = cut_short
        return ToolResult(content=body, metadata=meta)


class WriteFileArgs(ToolArgs):
    path: str = Field(
        description="File to write, relative to the workspace root; missing parent folders are created."
    )
    content: str = Field(description="The complete new content of the file, written exactly as given.")


class WriteFileTool(Tool[WriteFileArgs]):
    name = "write_file"
    description = (
        "Create a file or replace its whole content. Prefer edit_file for changing part of an "
        "existing file. Parent folders are created as needed, inside the workspace only."
    )
    args_model = WriteFileArgs

    def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolResult:
        sandbox = ctx.sandbox
        target = sandbox.resolve(args.path)
        shown = sandbox.display(target)
        if target == sandbox.root or target.is_dir():
            raise ToolError(f"{shown} is a directory; give a file path")
        existed = target.exists()
        if existed and not target.is_file():
            raise ToolError(f"{shown} is not a regular file (device, socket or pipe); refusing to write it")
        sandbox.refuse_git_internals(target)
        if not ctx.approved(self.name, args):
            return refused(self.name)

        old_text = ""
        old_binary = False
        if existed:
            old_bytes = sandbox.read_bytes(target)
            old_binary = looks_binary(old_bytes[:SNIFF_BYTES])
            old_text = "" if old_binary else old_bytes.decode("utf-8", errors="replace")
        data = args.content.encode("utf-8")
        try:
            sandbox.write_bytes(target, data)
        except OSError as exc:
            raise ToolError(f"could not write {shown}: {exc.strerror or exc}") from exc

        lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
        action = "created" if not existed else "overwrote"
        diff = "" if old_binary else unified_diff(old_text, args.content, shown, created=not existed)
        return ToolResult(
            content=f"{action} {shown} ({len(data):,} bytes, {lines} lines)",
            metadata={"path": shown, "created": not existed, "bytes": len(data), "diff": diff},
        )
