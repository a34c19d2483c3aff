"""list_dir and glob: sorted, capped, and blind to .git and friends."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitrate.tools import ToolContext, ToolLimits
from hitrate.tools.listing import PathFilter, glob_regex


@pytest.fixture
def tree(workspace: Path, outside: Path) -> Path:
    for rel in [
        "README.md",
        "setup.py",
        "src/pkg/__init__.py",
        "src/pkg/core.py",
        "src/pkg/core.pyi",
        "src/app.py",
        "docs/index.md",
        ".git/config",
        ".git/hooks/pre-commit.py",
        "node_modules/lib/index.py",
        "src/pkg/__pycache__/core.cpython-311.py",
    ]:
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\n")
    (workspace / "linked_out").symlink_to(outside)
    return workspace


def test_list_dir_sorted_with_kinds_and_hidden_note(registry, ctx, tree: Path) -> None:
    result = registry.execute("list_dir", {}, ctx)
    assert result.content == "\n".join(
        [
            "README.md (12 bytes)",
            "docs/",
            "linked_out@",
            "setup.py (11 bytes)",
            "src/",
            "[not listed: .git/, node_modules/]",
        ]
    )
    sub = registry.execute("list_dir", {"path": "src/pkg"}, ctx)
    assert sub.content.splitlines()[0] == "__init__.py (22 bytes)"
    assert "[not listed: __pycache__/]" in sub.content


def test_list_dir_cap_and_errors(registry, workspace: Path) -> None:
    for i in range(12):
        (workspace / f"f{i:02}.txt").write_text("")
    ctx = ToolContext(workspace=workspace, limits=ToolLimits(list_max_entries=5))
    result = registry.execute("list_dir", {"path": "."}, ctx)
    assert result.content.splitlines() == [f"f{i:02}.txt (0 bytes)" for i in range(5)] + ["[7 more entries not shown]"]
    assert result.metadata == {"path": ".", "entries": 12, "truncated": True}
    assert "folder not found: nope" in registry.execute("list_dir", {"path": "nope"}, ctx).content
    assert "is a file" in registry.execute("list_dir", {"path": "f00.txt"}, ctx).content


def test_glob_recursive_sorted_skipping_ignored(registry, ctx, tree: Path) -> None:
    result = registry.execute("glob", {"pattern": "**/*.py"}, ctx)
    assert result.content.splitlines() == ["setup.py", "src/app.py", "src/pkg/__init__.py", "src/pkg/core.py"]


def test_glob_single_level_braces_and_base_path(registry, ctx, tree: Path) -> None:
    assert registry.execute("glob", {"pattern": "*.py"}, ctx).content == "setup.py"
    braces = registry.execute("glob", {"pattern": "src/**/core.{py,pyi}"}, ctx)
    assert braces.content.splitlines() == ["src/pkg/core.py", "src/pkg/core.pyi"]
    based = registry.execute("glob", {"pattern": "*.py", "path": "src/pkg"}, ctx)
    assert based.content.splitlines() == ["src/pkg/__init__.py", "src/pkg/core.py"]
    none = registry.execute("glob", {"pattern": "**/*.rs"}, ctx)
    assert not none.is_error and none.content == "no files match '**/*.rs' under ."


def test_glob_does_not_follow_symlinks_out(registry, ctx, tree: Path) -> None:
    result = registry.execute("glob", {"pattern": "**/*.txt"}, ctx)
    assert "secret" not in result.content


def test_glob_cap_and_refusals(registry, workspace: Path) -> None:
    for i in range(8):
        (workspace / f"m{i}.py").write_text("")
    ctx = ToolContext(workspace=workspace, limits=ToolLimits(list_max_entries=3))
    result = registry.execute("glob", {"pattern": "*.py"}, ctx)
    assert result.content == "m0.py\nm1.py\nm2.py\n[showing 3 of 8 files; narrow the pattern or path]"
    assert registry.execute("glob", {"pattern": ""}, ctx).is_error
    assert "relative" in registry.execute("glob", {"pattern": "/etc/*"}, ctx).content


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "d/e/a.py", True),
        ("d/**", "d/e/a.py", True),
        ("a?.txt", "ab.txt", True),
        ("a?.txt", "a/.txt", False),
        ("[ab]*.md", "b.md", True),
        ("[!ab]*.md", "b.md", False),
        ("*.{js,ts}", "x.ts", True),
        ("*.{js,ts}", "x.tsx", False),
        ("file(1).txt", "file(1).txt", True),
    ],
)
def test_glob_regex(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).fullmatch(path)) is matches


def test_path_filter_names_and_negation() -> None:
    assert PathFilter("*.py").accepts("deep/down/x.py")
    assert not PathFilter("!*.py").accepts("deep/x.py")
    assert PathFilter("!*.py").accepts("deep/x.txt")
    assert PathFilter("sub/*.txt").accepts("sub/a.txt")
    assert not PathFilter("sub/*.txt").accepts("other/sub/a.txt")
