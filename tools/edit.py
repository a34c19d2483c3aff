"""edit_file: exact string replacement that refuses ambiguous or missing matches.

A refused edit explains itself: how many times and where the text occurs, or which passages of the
file are nearest to what the model asked for. Models recover from a precise message in one call;
a bare "not found" tends to start a loop of guesses.
"""

from __future__ import annotations

import difflib
import heapq

from pydantic import Field

from hitrate.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolResult, refused
from hitrate.tools.diffs import unified_diff
from hitrate.tools.files import cut_line, require_file
from hitrate.tools.sandbox import SNIFF_BYTES, looks_binary

MAX_CANDIDATES = 3
MIN_SIMILARITY = 0.5
SEED_LINES = 25  # best-matching first/last lines considered as window starts
MAX_CANDIDATE_LINES = 12


class EditFileArgs(ToolArgs):
    path: str = Field(description="File to edit, relative to the workspace root.")
    old_string: str = Field(
        description=(
            "Exact text to replace, including whitespace and indentation, without read_file's line-number "
            "prefixes. It must occur exactly once unless replace_all is true."
        )
    )
    new_string: str = Field(description="Text to put in place of old_string.")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence of old_string instead of requiring exactly one."
    )


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _occurrence_lines(text: str, needle: str, limit: int = 10) -> list[int]:
    lines: list[int] = []
    start = text.find(needle)
    while start != -1 and len(lines) < limit:
        lines.append(_line_of(text, start))
        start = text.find(needle, start + len(needle))
    return lines


def _squash(text: str) -> str:
    """Text with all whitespace runs removed per line: equal squashes differ only in spacing."""
    return "\n".join("".join(line.split()) for line in text.strip("\n").split("\n"))


def _numbered(lines: list[str], first: int) -> str:
    shown = lines[:MAX_CANDIDATE_LINES]
    out = [f"{first + i:>6}\t{cut_line(line, 200)}" for i, line in enumerate(shown)]
    if len(lines) > len(shown):
        out.append(f"   ...\t[{len(lines) - len(shown)} more lines]")
    return "\n".join(out)


def nearest_candidates(text: str, needle: str) -> tuple[list[tuple[float, int, int]], tuple[int, int] | None]:
    """Passages of `text` most like `needle`, as (similarity, first line, last line), best first.

    Also returns the line span of a passage equal to `needle` once whitespace is ignored, if any.
    Window starts are seeded from the file lines most like the needle's first and last lines, which
    bounds the work on large files to a few dozen full comparisons.
    """
    file_lines = text.split("\n")
    needle_lines = needle.strip("\n").split("\n")
    span = len(needle_lines)
    if not file_lines or span > len(file_lines):
        span = len(file_lines)

    def seeds(probe: str, offset: int) -> list[int]:
        probe = probe.strip()
        if not probe:
            return []
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(probe)
        rough: list[tuple[float, int]] = []
        for index, line in enumerate(file_lines):
            matcher.set_seq1(line.strip())
            if matcher.real_quick_ratio() >= MIN_SIMILARITY:
                quick = matcher.quick_ratio()
                if quick >= MIN_SIMILARITY:
                    rough.append((quick, index))
        # quick_ratio is an upper bound of ratio: refine only the best few of them.
        scored: list[tuple[float, int]] = []
        for _, index in heapq.nlargest(SEED_LINES * 4, rough):
            matcher.set_seq1(file_lines[index].strip())
            scored.append((matcher.ratio(), index - offset))
        return [start for _, start in heapq.nlargest(SEED_LINES, scored)]

    starts = set(seeds(needle_lines[0], 0))
    if span > 1:
        starts |= set(seeds(needle_lines[-1], span - 1))
    needle_body = "\n".join(needle_lines)
    squashed = _squash(needle_body)
    whitespace_match: tuple[int, int] | None = None
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(needle_body)
    scored: list[tuple[float, int, int]] = []
    for start in sorted(s for s in starts if 0 <= s <= len(file_lines) - span):
        window = "\n".join(file_lines[start : start + span])
        if whitespace_match is None and _squash(window) == squashed:
            whitespace_match = (start + 1, start + span)
        matcher.set_seq1(window)
        ratio = matcher.ratio()
        if ratio >= MIN_SIMILARITY:
            scored.append((round(ratio, 2), start + 1, start + span))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return scored[:MAX_CANDIDATES], whitespace_match


def not_found_message(text: str, needle: str, shown: str) -> str:
    candidates, whitespace_match = nearest_candidates(text, needle)
    file_lines = text.split("\n")
    parts = [f"old_string was not found in {shown}."]
    if whitespace_match is not None:
        first, last = whitespace_match
        parts.append(
            f"It matches lines {first}-{last} only if whitespace is ignored: the file's indentation or "
            "spacing differs (tabs vs spaces, trailing spaces?)."
        )
    if candidates:
        parts.append("Nearest passages in the file:")
        for similarity, first, last in candidates:
            parts.append(f"--- lines {first}-{last} (similarity {similarity:.2f})")
            parts.append(_numbered(file_lines[first - 1 : last], first))
        parts.append(
            "Copy the exact text (without the line-number prefix) into old_string, "
            "or read_file again if the file has changed."
        )
    else:
        parts.append("No similar passage was found; read_file to see the file's current content.")
    return "\n".join(parts)


class EditFileTool(Tool[EditFileArgs]):
    name = "edit_file"
    description = (
        "Replace exact text in an existing file. old_string must match the file byte for byte "
        "(whitespace included) and occur exactly once, unless replace_all is true. When it is missing "
        "or ambiguous nothing is changed and the error shows the nearest passages or every occurrence."
    )
    args_model = EditFileArgs

    def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolResult:
        sandbox = ctx.sandbox
        target = sandbox.resolve(args.path)
        shown = sandbox.display(target)
        require_file(sandbox, target, shown)
        sandbox.refuse_git_internals(target)
        if not args.old_string:
            raise ToolError("old_string is empty; use write_file to create a file or replace all of it")
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are identical; there is nothing to change")
        data = sandbox.read_bytes(target)
        if looks_binary(data[:SNIFF_BYTES]):
            raise ToolError(f"{shown} is a binary file; edit_file only changes text files")
        # surrogateescape keeps any invalid UTF-8 byte exactly as it was when the file is written back.
        text = data.decode("utf-8", errors="surrogateescape")

        old, new = args.old_string, args.new_string
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
            # Models see and write '\n' line ends; a CRLF file gets its own line ends back.
            crlf_old = old.replace("\n", "\r\n")
            if crlf_old in text:
                old, new = crlf_old, new.replace("\r\n", "\n").replace("\n", "\r\n")
                count = text.count(old)
        if count == 0:
            raise ToolError(not_found_message(text.replace("\r\n", "\n"), args.old_string, shown))
        if count > 1 and not args.replace_all:
            where = ", ".join(str(line) for line in _occurrence_lines(text, old))
            more = "" if count <= 10 else f" and {count - 10} more"
            raise ToolError(
                f"old_string occurs {count} times in {shown} (starting at lines {where}{more}); "
                "include more surrounding lines so that it matches exactly once, "
                "or set replace_all to true to replace every occurrence"
            )
        if not ctx.approved(self.name, args):
            return refused(self.name)

        first_line = _line_of(text, text.find(old))
        new_text = text.replace(old, new) if args.replace_all else text.replace(old, new, 1)
        try:
            sandbox.write_bytes(target, new_text.encode("utf-8", errors="surrogateescape"))
        except OSError as exc:
            raise ToolError(f"could not write {shown}: {exc.strerror or exc}") from exc
        diff = unified_diff(
            text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
            new_text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
            shown,
        )
        replaced = count if args.replace_all else 1
        noun = "occurrence" if replaced == 1 else "occurrences"
        return ToolResult(
            content=f"edited {shown}: replaced {replaced} {noun} (first at line {first_line})",
            metadata={"path": shown, "replacements": replaced, "first_line": first_line, "diff": diff},
        )
