"""edit_file: exact replacement; ambiguous and missing matches are refused and explained."""

from __future__ import annotations

from pathlib import Path

from hitrate.tools import ToolContext

SOURCE = """def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b
"""


def _edit(registry, ctx, **args):
    return registry.execute("edit_file", {"path": "m.py", **args}, ctx)


def test_single_replacement_with_diff(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = _edit(registry, ctx, old_string="    return a - b\n", new_string="    return a - b - 0\n")
    assert not result.is_error, result.content
    assert result.content == "edited m.py: replaced 1 occurrence (first at line 6)"
    assert (workspace / "m.py").read_text() == SOURCE.replace("a - b\n", "a - b - 0\n")
    diff = result.metadata["diff"]
    assert diff.startswith("--- a/m.py\n+++ b/m.py\n@@ -3,7 +3,7 @@\n")
    assert "-    return a - b\n+    return a - b - 0\n" in diff


def test_ambiguous_match_is_refused_with_locations(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = _edit(registry, ctx, old_string="(a, b):", new_string="(x, y):")
    assert result.is_error
    assert "occurs 3 times in m.py (starting at lines 1, 5, 9)" in result.content
    assert "replace_all" in result.content
    assert (workspace / "m.py").read_text() == SOURCE


def test_replace_all(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = _edit(registry, ctx, old_string="(a, b):", new_string="(x, y):", replace_all=True)
    assert result.content == "edited m.py: replaced 3 occurrences (first at line 1)"
    assert (workspace / "m.py").read_text().count("(x, y):") == 3
    assert result.metadata["replacements"] == 3


def test_missing_match_shows_nearest_candidates(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = _edit(registry, ctx, old_string="def sub(a, c):\n    return a - c\n", new_string="x")
    assert result.is_error
    text = result.content
    assert text.startswith("old_string was not found in m.py.\nNearest passages in the file:\n--- lines 5-6 (similarity")
    assert "     5\tdef sub(a, b):\n     6\t    return a - b" in text
    assert (workspace / "m.py").read_text() == SOURCE


def test_whitespace_only_mismatch_is_named(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = _edit(registry, ctx, old_string="def mul(a, b):\n  return a * b", new_string="x")
    assert result.is_error
    assert "matches lines 9-10 only if whitespace is ignored" in result.content


def test_missing_match_with_nothing_similar(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = _edit(registry, ctx, old_string="zzzzqqqq", new_string="x")
    assert result.is_error and "No similar passage was found" in result.content


def test_degenerate_requests_are_refused(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    assert "use write_file" in _edit(registry, ctx, old_string="", new_string="x").content
    assert "identical" in _edit(registry, ctx, old_string="add", new_string="add").content
    missing = registry.execute("edit_file", {"path": "nope.py", "old_string": "a", "new_string": "b"}, ctx)
    assert missing.is_error and "file not found: nope.py" in missing.content
    (workspace / "blob.bin").write_bytes(b"\x00\x01add")
    binary = registry.execute("edit_file", {"path": "blob.bin", "old_string": "add", "new_string": "x"}, ctx)
    assert binary.is_error and "binary file" in binary.content
    assert (workspace / "m.py").read_text() == SOURCE


def test_crlf_file_keeps_its_line_ends(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = _edit(registry, ctx, old_string="one\ntwo\n", new_string="uno\ndos\n")
    assert not result.is_error, result.content
    assert (workspace / "m.py").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


def test_invalid_utf8_elsewhere_survives(registry, ctx, workspace: Path) -> None:
    (workspace / "m.py").write_bytes(b"caf\xe9 = 1\nvalue = 2\n")
    result = _edit(registry, ctx, old_string="value = 2", new_string="value = 3")
    assert not result.is_error
    assert (workspace / "m.py").read_bytes() == b"caf\xe9 = 1\nvalue = 3\n"


def test_edit_asks_the_approval_hook(registry, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    seen = []
    ctx = ToolContext(workspace=workspace, approve=lambda tool, args: seen.append((tool, args)) or False)
    result = _edit(registry, ctx, old_string="a + b", new_string="b + a")
    assert result.is_error and result.metadata["refused"] is True
    assert seen == [("edit_file", {"path": "m.py", "old_string": "a + b", "new_string": "b + a", "replace_all": False})]
    assert (workspace / "m.py").read_text() == SOURCE


def test_candidate_search_is_bounded_on_large_files(registry, ctx, workspace: Path) -> None:
    body = "".join(f"value_{i} = compute({i}, factor={i % 7})\n" for i in range(20000))
    (workspace / "m.py").write_text(body)
    result = _edit(registry, ctx, old_string="value_12345 = compute(12345, factor=9)\n", new_string="x")
    assert result.is_error
    assert "12345" in result.content.split("Nearest passages in the file:\n")[1].split("\n")[1]
