"""Attacks that need privileges inside the sandbox: as root, bubblewrap used to hand the command
its capabilities (CAP_SYS_ADMIN among them), and one `umount` undid the sandbox.

Each runs twice in CI: as root (the runner's account) and as an unprivileged user (`.ci/run`).
Both must hold: no capability inside, no mount or unmount, whatever uid started the harness.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path

import pytest

from hitrate.evals.grading import grade
from hitrate.evals.task import load_task
from hitrate.tools.confine import ConfinementPolicy, detect

from evals_task_factory import FIXED

pytestmark = [
    pytest.mark.skipif(not detect().confined, reason=f"no OS sandbox on this machine: {detect().detail}"),
    pytest.mark.skipif(detect().kind != "bubblewrap", reason="capabilities and mounts are Linux's"),
    pytest.mark.timeout(90),
]


def _shell(registry, ctx, command: str):
    return registry.execute("shell", {"command": command, "timeout_s": 20}, ctx)


def test_the_shell_has_no_capabilities(registry, ctx) -> None:
    result = _shell(registry, ctx, "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status")
    values = dict(line.split(":\t") for line in result.content.splitlines() if line.startswith("Cap"))
    assert values.keys() == {"CapEff", "CapPrm", "CapBnd", "CapAmb"}, result.content
    assert all(int(value, 16) == 0 for value in values.values()), values


def test_unmounting_proc_does_not_show_the_harness_environment(registry, ctx, monkeypatch) -> None:
    secret = f"sk-ant-{uuid.uuid4().hex}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    command = (
        "umount -l /proc; echo umount=$?; "
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c sk-ant- ; "
        "echo procs=$(ls /proc | grep -c '^[0-9]')"
    )
    result = _shell(registry, ctx, command)
    assert "umount=0" not in result.content
    assert secret not in result.content
    assert int(result.content.split("procs=")[1].split()[0]) < 10  # still the sandbox's own /proc


def test_unmounting_a_hidden_folder_does_not_show_what_it_hides(registry, ctx) -> None:
    # Outside /tmp: the sandbox's private /tmp would hide a folder there anyway.
    hidden = Path.home() / f".hitrate-ledger-{uuid.uuid4().hex}"
    hidden.mkdir()
    try:
        (hidden / "ledger.db").write_text("WHOLE-TRANSCRIPTS\n")
        policy = ConfinementPolicy(hidden_paths=(str(hidden),))
        command = f"umount -l {hidden}; echo umount=$?; cat {hidden}/ledger.db; echo x > {hidden}/planted"
        result = _shell(registry, dataclasses.replace(ctx, confinement=policy), command)
        assert "WHOLE-TRANSCRIPTS" not in result.content and "umount=0" not in result.content
        assert not (hidden / "planted").exists()
    finally:
        for child in hidden.iterdir():
            child.unlink()
        hidden.rmdir()


def test_remounting_the_root_read_write_fails(registry, ctx) -> None:
    target = Path("/usr") / f"owned-{uuid.uuid4().hex}"
    command = f"mount -o remount,bind,rw /; echo mount=$?; mount -t tmpfs none /usr; echo tmpfs=$?; echo x > {target}"
    try:
        result = _shell(registry, ctx, command)
        assert "mount=0" not in result.content and "tmpfs=0" not in result.content
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_no_nested_user_namespace_gives_capabilities_back(registry, ctx) -> None:
    if "disable-userns" not in detect().features:
        pytest.skip("this bubblewrap cannot refuse nested user namespaces (needs 0.8+)")
    result = _shell(registry, ctx, "unshare -Urm sh -c 'umount -l /proc && echo ESCAPED'; echo rc=$?")
    assert "ESCAPED" not in result.content


_CAPABILITY_PROBE = """\
import subprocess
from mathx import add


def _caps():
    with open("/proc/self/status") as status:
        return {k: int(v, 16) for k, v in (line.split(":") for line in status if line.startswith("Cap"))}


def test_add():
    assert add(2, 3) == 5
    assert all(value == 0 for value in _caps().values()), _caps()
    for command in (["umount", "-l", "/proc"], ["mount", "-o", "remount,bind,rw", "/"]):
        done = subprocess.run(command, capture_output=True)
        assert done.returncode != 0, command
"""


def test_code_under_test_has_no_capabilities_and_cannot_mount(make_task) -> None:
    task = load_task(make_task(tests={"test_mathx.py": _CAPABILITY_PROBE}, solution={"mathx.py": FIXED}, p2p=[]))
    result = grade(task, overlay=task.solution_dir)
    assert result.confined
    assert result.resolved, result.output

