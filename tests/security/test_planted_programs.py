"""Programs the harness runs on the host, planted by the agent's shell in the workspace.

With a workspace virtualenv activated (`.venv/bin` first on PATH), one shell command can write
`.venv/bin/git`, `.venv/bin/bwrap` and `.venv/bin/rg`. None of them may run: the harness finds its
programs in system folders only, and runs them without its own environment.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from hitrate.harness.checkpoints import Checkpoints
from hitrate.harness.dynamic_context import git_summary
from hitrate.tools import ToolContext, ToolRegistry, confine, default_tools, trusted_programs
from hitrate.tools.grep import GrepTool, find_ripgrep
from hitrate.tools.trusted_programs import is_trusted_file, minimal_env, trusted_program

needs_git = pytest.mark.skipif(trusted_program("git") is None, reason="git is not installed in a system folder")
SECRET = "sk-ant-planted-program-must-not-see-this"


def _plant(folder: Path, name: str, marks: Path) -> Path:
    program = folder / name
    program.write_text(f"#!/bin/sh\nenv > {marks}/{name}-ran\nexit 0\n")
    program.chmod(0o755)
    return program


@pytest.fixture
def planted(workspace: Path, tmp_path: Path, monkeypatch) -> Path:
    """A workspace holding `.venv/bin/{git,bwrap,rg,prlimit}`, that folder first on PATH; the
    folder where planted programs leave a mark when they run."""
    marks = tmp_path / "marks"
    marks.mkdir()
    venv_bin = workspace / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    for name in ("git", "bwrap", "rg", "prlimit"):
        _plant(venv_bin, name, marks)
    monkeypatch.setenv("PATH", f"{venv_bin}:{os.environ['PATH']}")
    monkeypatch.setenv("VIRTUAL_ENV", str(workspace / ".venv"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    trusted_program.cache_clear()
    confine.detect.cache_clear()
    yield marks
    trusted_program.cache_clear()
    confine.detect.cache_clear()


@needs_git
def test_the_harness_git_status_does_not_run_a_planted_git(planted: Path, workspace: Path) -> None:
    subprocess.run(["/usr/bin/env", "-i", trusted_program("git"), "init", "-q", str(workspace)], check=True)
    assert git_summary(workspace) is not None
    assert os.listdir(planted) == []


@needs_git
def test_checkpoints_do_not_run_a_planted_git(planted: Path, workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    store = Checkpoints(workspace, store=tmp_path / "store")
    assert store.snapshot()
    assert os.listdir(planted) == []


def test_detect_and_the_shell_do_not_run_a_planted_bwrap(planted: Path, workspace: Path) -> None:
    found = confine.detect()
    if found.kind == "bubblewrap":
        assert found.program is not None and not found.program.startswith(str(workspace))
    registry = default_tools()
    ctx = ToolContext(workspace=workspace, allow_unconfined_shell=True)
    registry.execute("shell", {"command": "echo hi", "timeout_s": 20}, ctx)
    assert os.listdir(planted) == []


def test_grep_never_runs_an_rg_from_the_workspace(planted: Path, workspace: Path) -> None:
    found = find_ripgrep()
    assert found is None or not found.startswith(str(workspace))
    (workspace / "notes.txt").write_text("needle\n")
    tool = GrepTool(ripgrep=str(workspace / ".venv" / "bin" / "rg"))  # as if it had been found
    result = ToolRegistry([tool]).execute("grep", {"pattern": "needle"}, ToolContext(workspace=workspace))
    assert "notes.txt:1:needle" in result.content and result.metadata["engine"] == "python"
    assert os.listdir(planted) == []


def test_rg_runs_without_the_harness_environment(planted: Path, workspace: Path, tmp_path: Path) -> None:
    # A stand-in rg outside the workspace records the environment it was given.
    spy_dir = tmp_path / "bin"
    spy_dir.mkdir()
    spy = _plant(spy_dir, "rg", planted)
    (workspace / "notes.txt").write_text("needle\n")
    ToolRegistry([GrepTool(ripgrep=str(spy))]).execute("grep", {"pattern": "needle"}, ToolContext(workspace=workspace))
    seen = (planted / "rg-ran").read_text()
    assert SECRET not in seen and str(workspace) not in seen.split("PATH=")[1].splitlines()[0]


def test_programs_come_from_folders_only_root_or_the_user_can_write(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    program = loose / "git"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    assert not is_trusted_file(program)  # under /tmp: anyone may create folders there
    if trusted_program("git"):
        assert is_trusted_file(Path(trusted_program("git")))
    found = trusted_programs.find_in("sh", ["/nonexistent", "/bin", "/usr/bin"])
    assert found is not None and stat.S_ISREG(os.stat(found).st_mode)
    with pytest.raises(ValueError):
        trusted_programs.find_in("../sh", ["/bin"])


def test_the_minimal_environment_keeps_no_key_and_no_workspace_path(planted: Path, workspace: Path) -> None:
    env = minimal_env()
    assert SECRET not in env.values() and str(workspace) not in env["PATH"]
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}
    assert shutil.which("sh", path=env["PATH"]) is not None
