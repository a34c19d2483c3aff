"""Attacks on the workspace boundary through `shell`; each must fail inside the sandbox.

Each test is one attack from the red-team report (issue 14), and its assertion is the outcome
that holds. They skip, with the reason, where bubblewrap is missing or cannot create namespaces.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
from process_probe import gone_within

from hitrate.tools.confine import ConfinementPolicy, detect

pytestmark = [
    pytest.mark.skipif(not detect().confined, reason=f"no OS sandbox on this machine: {detect().detail}"),
    pytest.mark.timeout(60),
]


def _shell(registry, ctx, command: str, timeout_s: int = 20):
    return registry.execute("shell", {"command": command, "timeout_s": timeout_s}, ctx)


def test_harness_cwd_through_proc_ppid_is_out_of_sight(registry, ctx, tmp_path: Path, monkeypatch) -> None:
    # The harness runs from a folder holding the hidden tests; /proc/$PPID/cwd once led there.
    hidden = tmp_path / "hidden-tests"
    hidden.mkdir()
    (hidden / "test_secret.py").write_text("ANSWER = 42\n")
    monkeypatch.chdir(hidden)
    command = "cat /proc/$PPID/cwd/test_secret.py; echo found=$(ls /proc/*/cwd/ 2>/dev/null | grep -c test_secret)"
    result = _shell(registry, ctx, command)
    assert "ANSWER = 42" not in result.content and "found=0" in result.content
    assert result.metadata["confined"] is True


def test_harness_environ_through_proc_is_out_of_sight(registry, ctx, monkeypatch) -> None:
    secret = f"sk-ant-{uuid.uuid4().hex}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    result = _shell(registry, ctx, "cat /proc/$PPID/environ /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert secret not in result.content


def test_only_the_commands_own_processes_are_visible(registry, ctx) -> None:
    result = _shell(registry, ctx, "ls /proc | grep -c '^[0-9]'")
    # bubblewrap's init, bash, ls, grep: a handful, not the host's hundreds.
    assert int(result.content.split()[0]) < 10


def test_secret_variables_are_not_inherited(registry, workspace: Path) -> None:
    from hitrate.tools import ToolContext

    names = ["PGPASSWORD", "MYSQL_PWD", "DATABASE_URL", "GITHUB_PAT", "SLACK_WEBHOOK_URL", "SENTRY_DSN", "DOCKER_AUTH_CONFIG"]
    env = {"PATH": os.environ["PATH"], **{name: f"leak-{i}-{uuid.uuid4().hex}" for i, name in enumerate(names)}}
    result = _shell(registry, ToolContext(workspace=workspace, env=env), "env")
    for name in names:
        assert env[name] not in result.content


def test_writing_outside_the_workspace_fails(registry, ctx, workspace: Path) -> None:
    target = Path.home() / f".hitrate-security-{uuid.uuid4().hex}"
    sibling = workspace.parent / "sibling.txt"
    try:
        result = _shell(registry, ctx, f"echo owned > {target}; echo owned > {sibling}; touch /usr/owned-{target.name}; echo done")
        assert "done" in result.content
        assert not target.exists() and not sibling.exists()
        assert not Path(f"/usr/owned-{target.name}").exists()
        assert "Read-only file system" in result.content
    finally:
        target.unlink(missing_ok=True)


def test_the_workspace_and_a_private_tmp_are_writable(registry, ctx, workspace: Path) -> None:
    marker = f"hitrate-tmp-{uuid.uuid4().hex}"
    result = _shell(registry, ctx, f"echo hi > made.txt && echo x > /tmp/{marker} && ls /tmp")
    assert (workspace / "made.txt").read_text() == "hi\n"
    assert not Path("/tmp", marker).exists()  # the sandbox's /tmp is its own
    assert result.metadata["exit_code"] == 0


def test_setsid_and_double_fork_daemons_die_when_the_command_ends(registry, ctx) -> None:
    command = "setsid sleep 71.25 >/dev/null 2>&1 < /dev/null & ( ( sleep 72.25 >/dev/null 2>&1 & ) & ); echo started"
    result = _shell(registry, ctx, command)
    assert result.content.startswith("started")
    assert gone_within("71.25") and gone_within("72.25")


def test_setsid_daemons_die_at_the_timeout(registry, ctx) -> None:
    command = "setsid sleep 73.25 >/dev/null 2>&1 < /dev/null & ( ( sleep 74.25 & ) & ); sleep 60"
    result = _shell(registry, ctx, command, timeout_s=1)
    assert result.metadata["timed_out"] is True
    assert gone_within("73.25") and gone_within("74.25")


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(5)
    threading.Thread(target=lambda: _accept_all(server), daemon=True).start()
    return server, server.getsockname()[1]


def _accept_all(server: socket.socket) -> None:
    try:
        while True:
            conn, _ = server.accept()
            conn.close()
    except OSError:
        return


def test_network_is_off_by_default(registry, ctx) -> None:
    server, port = _listener()
    try:
        result = _shell(registry, ctx, f"echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED", timeout_s=10)
        assert "CONNECTED" not in result.content
    finally:
        server.close()


def test_network_can_be_allowed(registry, ctx) -> None:
    server, port = _listener()
    try:
        allowed = dataclasses.replace(ctx, confinement=ConfinementPolicy(network=True))
        result = _shell(registry, allowed, f"echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED", timeout_s=10)
        assert "CONNECTED" in result.content
    finally:
        server.close()


def test_credential_folders_in_home_are_hidden(registry, workspace: Path) -> None:
    import shutil

    # Not under /tmp: the sandbox's private /tmp would hide it whatever the hidden list says.
    home = Path.home() / f".hitrate-fake-home-{uuid.uuid4().hex}"
    try:
        _credential_folders_are_hidden(registry, workspace, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _credential_folders_are_hidden(registry, workspace: Path, home: Path) -> None:
    from hitrate.tools import ToolContext

    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".netrc").write_text("machine x password hunter2\n")
    (home / ".bash_history").write_text("export OPENAI_API_KEY=sk-typed-once\n")
    (home / ".cache" / "huggingface").mkdir(parents=True)
    (home / ".cache" / "huggingface" / "token").write_text("hf_secret_token\n")
    ctx = ToolContext(workspace=workspace, env={"PATH": os.environ["PATH"], "HOME": str(home)})
    command = f"cat {home}/.ssh/id_ed25519 {home}/.netrc {home}/.bash_history {home}/.cache/huggingface/token; ls -a {home}/.ssh"
    result = _shell(registry, ctx, command)
    for secret in ("PRIVATE KEY", "hunter2", "sk-typed-once", "hf_secret_token"):
        assert secret not in result.content


def test_paths_the_caller_hides_are_empty(registry, ctx, tmp_path: Path) -> None:
    # An eval hides the task's hidden tests and reference solution this way.
    hidden = Path.home() / f".hitrate-hidden-{uuid.uuid4().hex}"
    hidden.mkdir()
    try:
        (hidden / "solution.py").write_text("THE-REFERENCE-SOLUTION\n")
        policy = ConfinementPolicy(hidden_paths=(str(hidden),))
        command = f"cat {hidden}/solution.py; echo entries=$(ls -A {hidden} | wc -l)"
        result = _shell(registry, dataclasses.replace(ctx, confinement=policy), command)
        assert "THE-REFERENCE-SOLUTION" not in result.content and "entries=0" in result.content
    finally:
        (hidden / "solution.py").unlink()
        hidden.rmdir()


def test_memory_is_limited(registry, ctx) -> None:
    policy = ConfinementPolicy(max_memory_bytes=256 * 1024**2)
    command = "python3 -c 'b = bytearray(1024 ** 3); print(\"ALLOCATED\")'"
    result = _shell(registry, dataclasses.replace(ctx, confinement=policy), command)
    assert "ALLOCATED" not in result.content and "MemoryError" in result.content


def test_file_size_is_limited(registry, ctx, workspace: Path) -> None:
    policy = ConfinementPolicy(max_file_bytes=64 * 1024)
    result = _shell(registry, dataclasses.replace(ctx, confinement=policy), "head -c 1000000 /dev/zero > big.bin; echo rc=$?")
    assert (workspace / "big.bin").stat().st_size <= 64 * 1024
    assert "rc=0" not in result.content


@pytest.mark.skipif(os.getuid() == 0, reason="the kernel does not apply RLIMIT_NPROC to root")
def test_process_count_is_limited(registry, ctx) -> None:
    policy = ConfinementPolicy(max_processes=16)
    # The sleeps write nowhere: holding the pipe, they would keep `tail` waiting past the timeout.
    command = "for i in $(seq 64); do sleep 75.25 >/dev/null 2>&1 & done 2>&1 | tail -1; echo finished"
    result = _shell(registry, dataclasses.replace(ctx, confinement=policy), command)
    assert "Resource temporarily unavailable" in result.content or "fork" in result.content
    assert gone_within("75.25")


def test_git_config_and_hooks_are_read_only_to_the_shell(registry, ctx, workspace: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    before = (workspace / ".git" / "config").read_text()
    command = (
        "git config core.fsmonitor 'touch owned'; echo '#!/bin/sh' > .git/hooks/pre-commit; "
        "echo x > file.txt && git add file.txt && echo ADDED"
    )
    result = _shell(registry, ctx, command)
    assert (workspace / ".git" / "config").read_text() == before
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert "ADDED" in result.content  # the rest of the repository stays usable
