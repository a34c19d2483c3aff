"""shell: workspace cwd, whole-group kill on timeout, capped output, allowlisted environment."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from hitrate.tools import ToolContext, ToolLimits
from hitrate.tools.confine import ConfinementPolicy, allowed_env
from hitrate.tools.shell import CappedOutput


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
def test_timeout_kills_the_whole_process_group(registry, ctx, workspace: Path, gone_within) -> None:
    # The child ignores SIGTERM and would outlive its parent: only a group-wide SIGKILL stops it.
    command = "(trap '' TERM; exec sleep 61.25) & echo $! > child.pid; echo started; sleep 60"
    result = registry.execute("shell", {"command": command, "timeout_s": 2}, ctx)
    assert result.is_error
    assert result.content == "started\n[timed out after 2 s: the command and every process it started were killed]"
    assert result.metadata["timed_out"] is True
    _read_pid(workspace / "child.pid")
    assert gone_within("61.25"), "the child outlived the timed-out command"


@pytest.mark.timeout(30)
def test_background_leftovers_are_stopped_and_do_not_hang_the_call(registry, ctx, workspace: Path, gone_within) -> None:
    # The background sleep keeps the output pipe open; the call must still return right after `echo`.
    result = registry.execute("shell", {"command": "sleep 62.25 & echo $! > bg.pid; echo quick", "timeout_s": 30}, ctx)
    assert result.content == "quick\n[exit code 0]"
    assert not result.metadata["timed_out"]
    _read_pid(workspace / "bg.pid")
    assert gone_within("62.25")


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


def test_environment_is_an_allowlist(registry, workspace: Path) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-value-1",
        "PGPASSWORD": "value-2",
        "MYSQL_PWD": "value-3",
        "DATABASE_URL": "postgres://u:value-4@db/x",
        "GITHUB_PAT": "value-5",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.com/value-6",
        "SENTRY_DSN": "https://value-7@sentry.io/1",
        "DOCKER_AUTH_CONFIG": "value-8",
        "SSH_AUTH_SOCK": "/tmp/value-9",
    }
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **secrets}
    ctx = ToolContext(workspace=workspace, env=env)
    result = registry.execute("shell", {"command": "env"}, ctx)
    for value in secrets.values():
        assert value not in result.content
    assert "LANG=C.UTF-8" in result.content and "LC_ALL=C.UTF-8" in result.content
    assert "GIT_TERMINAL_PROMPT=0" in result.content
    assert result.metadata["withheld_env"] == sorted(secrets)


def test_process_environment_is_filtered_by_default(registry, ctx, monkeypatch) -> None:
    monkeypatch.setenv("HITRATE_TEST_SOMETHING", "do-not-leak")
    result = registry.execute("shell", {"command": "env"}, ctx)
    assert "do-not-leak" not in result.content
    assert "PATH=" in result.content


def test_pass_env_names_extra_variables(registry, workspace: Path) -> None:
    policy = ConfinementPolicy(pass_env=("TOKENIZERS_*",))
    env = {"PATH": os.environ["PATH"], "TOKENIZERS_PARALLELISM": "false", "OTHER": "x"}
    ctx = ToolContext(workspace=workspace, env=env, confinement=policy)
    result = registry.execute("shell", {"command": "env"}, ctx)
    assert "TOKENIZERS_PARALLELISM=false" in result.content
    assert "OTHER=x" not in result.content


def test_allowed_env_returns_withheld_names() -> None:
    kept, withheld = allowed_env({"A_TOKEN": "x", "HOME": "/h", "LC_CTYPE": "C"})
    assert withheld == ["A_TOKEN"]
    assert kept["HOME"] == "/h" and kept["LC_CTYPE"] == "C" and "A_TOKEN" not in kept



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
def test_sigterm_ignored_by_everyone_escalates_to_sigkill(registry, ctx, workspace: Path, gone_within) -> None:
    command = "trap '' TERM; sleep 63.25 & echo $! > child.pid; sleep 60"
    result = registry.execute("shell", {"command": command, "timeout_s": 2}, ctx)
    assert result.metadata["timed_out"] is True
    # Unconfined, SIGKILL follows the ignored SIGTERM; confined, the SIGTERM ends bubblewrap and the
    # kernel kills its whole PID namespace.
    assert result.metadata["exit_code"] in (-9, -15)
    _read_pid(workspace / "child.pid")
    assert gone_within("63.25")


def test_an_interpreter_installed_under_tmp_stays_visible_in_the_sandbox(monkeypatch, tmp_path):
    # A checkout under /tmp keeps its virtual environment there; the sandbox's private /tmp must
    # not hide the Python that runs the graded tests (it would fail with "No such file").
    import sys as _sys

    from hitrate.tools.confine import ConfinementPolicy, confined_argv

    venv = Path("/tmp/hitrate-test-venv")
    monkeypatch.setattr(_sys, "prefix", str(venv))
    monkeypatch.setattr(_sys, "exec_prefix", str(venv))
    argv = confined_argv(["python", "-c", "pass"], workspace=tmp_path, policy=ConfinementPolicy(), env={}, bwrap="bwrap")
    tmpfs = argv.index("--tmpfs")
    bound = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind" and i > tmpfs]
    assert str(venv) in bound
