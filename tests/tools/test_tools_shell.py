"""shell: workspace cwd, whole-group kill on timeout, capped output, scrubbed environment."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from hitrate.tools import ToolContext, ToolLimits
from hitrate.tools.shell import CappedOutput, is_secret_name, scrub_env


def _alive(pid: int) -> bool:
    """Running and not a zombie (a killed orphan may wait a while for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _wait_dead(pid: int, within_s: float = 3.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def _read_pid(path: Path) -> int:
    for _ in range(100):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def test_runs_in_workspace_and_reports_exit_code(registry, ctx, workspace: Path) -> None:
    result = registry.execute("shell", {"command": "pwd; echo oops >&2; exit 3"}, ctx)
    assert result.content == f"{workspace.resolve()}\noops\n[exit code 3]"
    assert result.metadata["exit_code"] == 3
    assert result.is_error is False
    ok = registry.execute("shell", {"command": "touch made.txt"}, ctx)
    assert ok.content == "(no output)\n[exit code 0]"
    assert (workspace / "made.txt").exists()


def test_stdin_is_empty(registry, ctx) -> None:
    result = registry.execute("shell", {"command": "cat; echo done", "timeout_s": 5}, ctx)
    assert result.content == "done\n[exit code 0]"


@pytest.mark.timeout(30)
def test_timeout_kills_the_whole_process_group(registry, ctx, workspace: Path) -> None:
    # The child ignores SIGTERM and would outlive its parent: only a group-wide SIGKILL stops it.
    command = "(trap '' TERM; exec sleep 60) & echo $! > child.pid; echo started; sleep 60"
    result = registry.execute("shell", {"command": command, "timeout_s": 2}, ctx)
    assert result.is_error
    assert result.content == "started\n[timed out after 2 s: the command and every process it started were killed]"
    assert result.metadata["timed_out"] is True
    child = _read_pid(workspace / "child.pid")
    assert _wait_dead(child), f"child {child} outlived the timed-out command"


@pytest.mark.timeout(30)
def test_background_leftovers_are_stopped_and_do_not_hang_the_call(registry, ctx, workspace: Path) -> None:
    # The background sleep keeps the output pipe open; the call must still return right after `echo`.
    result = registry.execute("shell", {"command": "sleep 60 & echo $! > bg.pid; echo quick", "timeout_s": 30}, ctx)
    assert result.content == "quick\n[exit code 0]"
    assert not result.metadata["timed_out"]
    assert _wait_dead(_read_pid(workspace / "bg.pid"))


@pytest.mark.timeout(30)
def test_command_that_closes_its_output_is_still_waited_for(registry, ctx, workspace: Path) -> None:
    result = registry.execute("shell", {"command": "exec >&- 2>&-; sleep 0.3; touch finished", "timeout_s": 10}, ctx)
    assert result.metadata["exit_code"] == 0
    assert (workspace / "finished").exists()


def test_output_is_capped_with_a_precise_note(registry, workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, limits=ToolLimits(output_max_chars=1000))
    result = registry.execute("shell", {"command": "seq 1 20000"}, ctx)
    full = "".join(f"{i}\n" for i in range(1, 20001))
    match = re.search(
        r"\n\[\.\.\. ([\d,]+) bytes \(([\d,]+) lines\) cut from the middle of ([\d,]+) bytes of output \.\.\.\]\n",
        result.content,
    )
    assert match, result.content
    cut, cut_lines, total = (int(g.replace(",", "")) for g in match.groups())
    head = result.content[: match.start() + 1]
    tail = result.content[match.end() :].removesuffix("[exit code 0]")
    assert total == len(full) == result.metadata["output_bytes"]
    assert full.startswith(head) and full.endswith(tail)
    assert len(head) + cut + len(tail) == total
    assert cut_lines == full.count("\n") - head.count("\n") - tail.count("\n")
    assert len(result.content) < 1200


def test_capped_output_without_cut_is_verbatim() -> None:
    buffer = CappedOutput(100)
    buffer.feed(b"abc\n")
    buffer.feed(b"def")
    assert buffer.render() == "abc\ndef"
    assert buffer.cut_bytes == 0


def test_environment_is_scrubbed(registry, workspace: Path) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "OPENAI_API_KEY": "sk-value-1",
        "ANTHROPIC_BASE_URL": "http://value-2",
        "GITHUB_TOKEN": "value-3",
        "AWS_REGION": "value-4",
        "MY_SECRET": "value-5",
        "DB_PASSWORD": "value-6",
        "SSH_AUTH_SOCK": "/tmp/value-7",
        "stripe_api_key": "value-8",
        "TOKENIZERS_PARALLELISM": "kept-1",
        "LANG": "kept-2",
    }
    ctx = ToolContext(workspace=workspace, env=env)
    result = registry.execute("shell", {"command": "env"}, ctx)
    for i in range(1, 9):
        assert f"value-{i}" not in result.content
    assert "TOKENIZERS_PARALLELISM=kept-1" in result.content
    assert "LANG=kept-2" in result.content
    assert "GIT_TERMINAL_PROMPT=0" in result.content
    assert result.metadata["scrubbed_env"] == sorted(
        ["OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "GITHUB_TOKEN", "AWS_REGION", "MY_SECRET", "DB_PASSWORD", "SSH_AUTH_SOCK", "stripe_api_key"]
    )


def test_process_environment_is_scrubbed_by_default(registry, ctx, monkeypatch) -> None:
    monkeypatch.setenv("HITRATE_TEST_API_KEY", "do-not-leak")
    monkeypatch.setenv("HITRATE_TEST_VISIBLE", "fine")
    result = registry.execute("shell", {"command": "env"}, ctx)
    assert "do-not-leak" not in result.content
    assert "HITRATE_TEST_VISIBLE=fine" in result.content


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("HF_TOKEN", True),
        ("AWS_SESSION_TOKEN", True),
        ("CLIENT_SECRET", True),
        ("MY_SECRET_VALUE", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("HOME", False),
        ("PATH", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("PYTHONPATH", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_scrub_env_returns_removed_names() -> None:
    kept, removed = scrub_env({"A_TOKEN": "x", "B": "y"})
    assert removed == ["A_TOKEN"]
    assert kept["B"] == "y" and "A_TOKEN" not in kept


def test_shell_asks_the_approval_hook(registry, workspace: Path) -> None:
    seen = []
    ctx = ToolContext(workspace=workspace, approve=lambda tool, args: seen.append((tool, args)) or False)
    result = registry.execute("shell", {"command": "touch should_not_exist"}, ctx)
    assert result.is_error and "not approved" in result.content
    assert seen == [("shell", {"command": "touch should_not_exist", "timeout_s": 120})]
    assert not (workspace / "should_not_exist").exists()


def test_shell_refusals(registry, ctx) -> None:
    assert "command is empty" in registry.execute("shell", {"command": "  "}, ctx).content
    too_long = registry.execute("shell", {"command": "true", "timeout_s": 99999}, ctx)
    assert too_long.is_error and "timeout_s" in too_long.content


@pytest.mark.timeout(30)
def test_sigterm_ignored_by_everyone_escalates_to_sigkill(registry, ctx, workspace: Path) -> None:
    command = "trap '' TERM; sleep 60 & echo $! > child.pid; sleep 60"
    result = registry.execute("shell", {"command": command, "timeout_s": 2}, ctx)
    assert result.metadata["timed_out"] is True
    assert result.metadata["exit_code"] == -9
    assert _wait_dead(_read_pid(workspace / "child.pid"))
