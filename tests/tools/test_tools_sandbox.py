"""The sandbox policy: every path resolves inside the workspace, or is refused saying why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hitrate.tools import Sandbox, SandboxError, ToolContext
from hitrate.tools.sandbox import describe_binary, looks_binary, sniff

PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"


def test_relative_paths_resolve_inside(workspace: Path) -> None:
    (workspace / "src").mkdir()
    sandbox = Sandbox(workspace)
    assert sandbox.resolve("src/a.py") == workspace.resolve() / "src" / "a.py"
    assert sandbox.resolve("src/../b.txt") == workspace.resolve() / "b.txt"
    assert sandbox.resolve(".") == workspace.resolve()
    assert sandbox.display(sandbox.resolve(".")) == "."
    assert sandbox.display(sandbox.resolve("src//a.py")) == "src/a.py"


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "src/../../outside", "a/b/../../../x"])
def test_dotdot_escape_is_refused(workspace: Path, path: str) -> None:
    with pytest.raises(SandboxError, match="escapes the workspace through '..'"):
        Sandbox(workspace).resolve(path)


def test_absolute_path_outside_is_refused(workspace: Path, outside: Path) -> None:
    sandbox = Sandbox(workspace)
    for path in [str(outside / "secret.txt"), "/etc/passwd", "/"]:
        with pytest.raises(SandboxError, match="absolute path .* is outside the workspace"):
            sandbox.resolve(path)


def test_absolute_path_inside_is_accepted(workspace: Path) -> None:
    sandbox = Sandbox(workspace)
    assert sandbox.resolve(str(workspace / "x.txt")) == workspace.resolve() / "x.txt"


def test_workspace_reached_through_a_symlink_accepts_its_absolute_paths(tmp_path: Path, workspace: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)
    sandbox = Sandbox(alias)
    assert sandbox.root == workspace.resolve()
    assert sandbox.resolve(str(alias / "f.txt")) == workspace.resolve() / "f.txt"


def test_symlinks_pointing_out_are_refused(workspace: Path, outside: Path) -> None:
    (workspace / "file_link").symlink_to(outside / "secret.txt")
    (workspace / "dir_link").symlink_to(outside)
    sandbox = Sandbox(workspace)
    for path in ["file_link", "dir_link", "dir_link/secret.txt", "dir_link/new_file.txt"]:
        with pytest.raises(SandboxError, match="symlink that points outside"):
            sandbox.resolve(path)


def test_symlinks_inside_are_followed(workspace: Path) -> None:
    (workspace / "real.txt").write_text("x")
    (workspace / "alias.txt").symlink_to("real.txt")
    assert Sandbox(workspace).resolve("alias.txt") == workspace.resolve() / "real.txt"


def test_nul_and_empty_paths_are_refused(workspace: Path) -> None:
    sandbox = Sandbox(workspace)
    with pytest.raises(SandboxError, match="NUL byte"):
        sandbox.resolve("a\x00b")
    with pytest.raises(SandboxError, match="path is empty"):
        sandbox.resolve("  ")


def test_workspace_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a directory"):
        Sandbox(tmp_path / "missing")


def test_binary_detection_and_description(workspace: Path) -> None:
    image = workspace / "logo.png"
    image.write_bytes(PNG_HEADER + bytes(range(256)) * 4)
    sample = sniff(image)
    assert looks_binary(sample)
    text = describe_binary("logo.png", image, sample)
    assert text == f"logo.png: binary file, {image.stat().st_size:,} bytes, looks like PNG image; contents not shown"
    assert not looks_binary("héllo wörld\n".encode())
    assert not looks_binary(b"")
    assert looks_binary(bytes(range(1, 9)) * 50)  # control characters without a NUL


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("write_file", {"path": "../outside/new.txt", "content": "x"}),
        ("edit_file", {"path": "../outside/secret.txt", "old_string": "TOP", "new_string": "x"}),
        ("list_dir", {"path": ".."}),
        ("glob", {"pattern": "*", "path": "../outside"}),
        ("grep", {"pattern": "SECRET", "path": "../outside"}),
    ],
)
def test_every_path_tool_refuses_escapes(registry, ctx: ToolContext, outside: Path, tool: str, args: dict) -> None:
    result = registry.execute(tool, args, ctx)
    assert result.is_error
    assert "escapes the workspace" in result.content
    assert "TOP SECRET" not in result.content
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_writing_through_an_outward_symlink_creates_nothing_outside(registry, ctx, workspace: Path, outside: Path) -> None:
    (workspace / "out").symlink_to(outside)
    result = registry.execute("write_file", {"path": "out/sub/evil.txt", "content": "x"}, ctx)
    assert result.is_error and "symlink" in result.content
    assert not (outside / "sub").exists()


def test_nul_byte_through_a_tool_is_a_clear_error(registry, ctx) -> None:
    result = registry.execute("read_file", '{"path": "a\\u0000b"}', ctx)
    assert result.is_error
    assert "NUL byte" in result.content
    assert os.listdir(ctx.workspace) == []
