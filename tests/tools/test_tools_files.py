"""read_file and write_file against real files."""

from __future__ import annotations

import os
from pathlib import Path

from hitrate.tools import ToolContext, ToolLimits


def _ctx(workspace: Path, **limits) -> ToolContext:
    return ToolContext(workspace=workspace, limits=ToolLimits(**limits))


def test_read_numbers_lines(registry, ctx, workspace: Path) -> None:
    (workspace / "a.py").write_text("first\nsecond\n\tthird\n")
    result = registry.execute("read_file", {"path": "a.py"}, ctx)
    assert not result.is_error
    assert result.content == "     1\tfirst\n     2\tsecond\n     3\t\tthird"
    assert result.metadata["total_lines"] == 3


def test_read_line_range_says_where_it_is(registry, ctx, workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = registry.execute("read_file", {"path": "n.txt", "start_line": 4, "end_line": 6}, ctx)
    assert result.content == "     4\tline 4\n     5\tline 5\n     6\tline 6\n[lines 4-6 of 10]"
    tail = registry.execute("read_file", {"path": "n.txt", "start_line": 9}, ctx)
    assert tail.content.endswith("    10\tline 10\n[lines 9-10 of 10]")


def test_read_line_cap_pages_with_continuation(registry, workspace: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 101)))
    result = registry.execute("read_file", {"path": "long.txt"}, _ctx(workspace, read_max_lines=30))
    lines = result.content.split("\n")
    assert lines[0] == "     1\t1" and lines[29] == "    30\t30"
    assert lines[30] == "[showing lines 1-30 of 100; continue with start_line=31]"
    assert result.metadata["truncated"] is True


def test_read_char_cap_and_long_line_cut(registry, workspace: Path) -> None:
    (workspace / "wide.txt").write_text("x" * 500 + "\n" + "short\n" * 50)
    result = registry.execute("read_file", {"path": "wide.txt"}, _ctx(workspace, max_line_chars=100, output_max_chars=300))
    first = result.content.split("\n")[0]
    assert first == "     1\t" + "x" * 100 + "… [line cut, 400 more chars]"
    assert "continue with start_line=" in result.content
    assert len(result.content) < 400


def test_read_size_cap_refuses(registry, workspace: Path) -> None:
    (workspace / "big.log").write_text("y\n" * 1000)
    result = registry.execute("read_file", {"path": "big.log"}, _ctx(workspace, read_max_file_bytes=1000))
    assert result.is_error
    assert "2,000 bytes, over the 1,000-byte read cap" in result.content


def test_read_binary_is_described_not_dumped(registry, ctx, workspace: Path) -> None:
    payload = b"\x7fELF\x02\x01\x01" + b"\x00" * 64 + b"hidden-marker" * 10
    (workspace / "prog").write_bytes(payload)
    result = registry.execute("read_file", {"path": "prog"}, ctx)
    assert not result.is_error
    assert result.content == f"prog: binary file, {len(payload):,} bytes, looks like ELF executable or shared library; contents not shown"
    assert "hidden-marker" not in result.content
    assert result.metadata["binary"] is True


def test_read_refusals(registry, ctx, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "config.py").write_text("a\nb\n")
    (workspace / "empty.txt").write_text("")
    cases = {
        "src": "is a directory",
        "src/confg.py": "file not found: src/confg.py; did you mean src/config.py?",
        "nope/x.py": "its folder 'nope' does not exist",
    }
    for path, expected in cases.items():
        result = registry.execute("read_file", {"path": path}, ctx)
        assert result.is_error and expected in result.content, result.content
    past = registry.execute("read_file", {"path": "src/config.py", "start_line": 5}, ctx)
    assert past.is_error and "past the end of src/config.py, which has 2 lines" in past.content
    backwards = registry.execute("read_file", {"path": "src/config.py", "start_line": 5, "end_line": 2}, ctx)
    assert backwards.is_error and "end_line (2) is before start_line (5)" in backwards.content
    empty = registry.execute("read_file", {"path": "empty.txt"}, ctx)
    assert not empty.is_error and empty.content == "empty.txt is empty (0 lines)"


def test_read_refuses_a_fifo_instead_of_blocking(registry, ctx, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    result = registry.execute("read_file", {"path": "pipe"}, ctx)
    assert result.is_error and "not a regular file" in result.content


def test_write_creates_parent_folders_and_keeps_bytes(registry, ctx, workspace: Path) -> None:
    content = "line one\r\nline two\nno newline at end"
    result = registry.execute("write_file", {"path": "deep/er/new.txt", "content": content}, ctx)
    assert not result.is_error
    assert (workspace / "deep" / "er" / "new.txt").read_bytes() == content.encode()
    assert result.content == f"created deep/er/new.txt ({len(content.encode())} bytes, 3 lines)"
    assert result.metadata["created"] is True
    assert result.metadata["diff"].startswith("--- /dev/null\n+++ b/deep/er/new.txt\n")
    assert "\\ No newline at end of file" in result.metadata["diff"]


def test_write_overwrites_with_a_diff(registry, ctx, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\nb\n")
    result = registry.execute("write_file", {"path": "f.txt", "content": "a\nc\n"}, ctx)
    assert result.content.startswith("overwrote f.txt")
    assert result.metadata["diff"] == "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"


def test_write_refuses_directories_and_file_as_parent(registry, ctx, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "plain").write_text("x")
    assert "is a directory" in registry.execute("write_file", {"path": "d", "content": "x"}, ctx).content
    assert "is a directory" in registry.execute("write_file", {"path": ".", "content": "x"}, ctx).content
    under_file = registry.execute("write_file", {"path": "plain/child.txt", "content": "x"}, ctx)
    assert under_file.is_error and "could not write plain/child.txt" in under_file.content
    assert (workspace / "plain").read_text() == "x"


def test_write_asks_the_approval_hook(workspace: Path, registry) -> None:
    calls: list[tuple[str, dict]] = []

    def deny(tool: str, args: dict) -> bool:
        calls.append((tool, args))
        return False

    ctx = ToolContext(workspace=workspace, approve=deny)
    result = registry.execute("write_file", {"path": "x/y.txt", "content": "hi"}, ctx)
    assert result.is_error and "not approved" in result.content
    assert calls == [("write_file", {"path": "x/y.txt", "content": "hi"})]
    assert not (workspace / "x").exists()

    allowed = ToolContext(workspace=workspace, approve=lambda tool, args: True)
    assert not registry.execute("write_file", {"path": "x/y.txt", "content": "hi"}, allowed).is_error
    assert (workspace / "x" / "y.txt").read_text() == "hi"


def test_read_always_shows_at_least_one_line(registry, workspace: Path) -> None:
    (workspace / "one.txt").write_text("z" * 500 + "\nnext\n")
    ctx = _ctx(workspace, max_line_chars=1000, output_max_chars=200)
    result = registry.execute("read_file", {"path": "one.txt"}, ctx)
    assert result.content.startswith("     1\t" + "z" * 500 + "\n[showing lines 1-1 of 2; continue with start_line=2]")
