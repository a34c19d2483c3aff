"""macOS: `shell` and grading run under `sandbox-exec` with a Seatbelt profile (deny by default,
reads but the hidden paths, writes to the workspace and temporary folders only, network off).

Linux machines cannot run `sandbox-exec`, so these tests check what hitrate hands it: the profile
text (against a golden file, and as well-formed S-expressions naming only declared parameters),
that hostile workspace paths cannot change the profile, the argv, that `detect()` picks it on
macOS, and that the shell tool runs commands through it. On macOS, the last test runs the real
sandbox-exec against the attacks the bubblewrap tests try."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hitrate.tools import ToolContext, confine, seatbelt
from hitrate.tools.confine import Availability, ConfinementPolicy, sandboxed_argv
from hitrate.tools.registry import ToolRegistry
from hitrate.tools.shell import ShellTool

GOLDEN = Path(__file__).parent / "data" / "seatbelt_profile.sb"
SEATBELT = Availability("seatbelt", "sandbox-exec (Seatbelt) at /usr/bin/sandbox-exec", program=seatbelt.SANDBOX_EXEC)


def _golden_profile() -> tuple[str, list[tuple[str, str]]]:
    return seatbelt.profile_and_params(
        Path("/Users/dev/project"),
        hidden=["/Users/dev/.ssh", "/Users/dev/Library/Application Support/hitrate"],
        writable=["/private/tmp", "/private/var/tmp"],
        network=False,
    )


def _parse(text: str) -> list:
    """SBPL as nested lists: strings as ('str', value), symbols as plain str. Raises ValueError on
    an unbalanced parenthesis, an unclosed string or an unknown escape."""
    stack: list[list] = [[]]
    i = 0
    while i < len(text):
        c = text[i]
        if c == ";":
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
        elif c.isspace():
            i += 1
        elif c == "(":
            stack.append([])
            i += 1
        elif c == ")":
            if len(stack) == 1:
                raise ValueError(f"unbalanced ')' at {i}")
            done = stack.pop()
            stack[-1].append(done)
            i += 1
        elif c == '"':
            j, value = i + 1, []
            while True:
                if j >= len(text):
                    raise ValueError(f"unclosed string at {i}")
                if text[j] == "\\":
                    if text[j + 1] not in '\\"':
                        raise ValueError(f"unknown escape at {j}")
                    value.append(text[j + 1])
                    j += 2
                elif text[j] == '"':
                    break
                else:
                    value.append(text[j])
                    j += 1
            stack[-1].append(("str", "".join(value)))
            i = j + 1
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in '()";':
                j += 1
            stack[-1].append(text[i:j])
            i = j
    if len(stack) != 1:
        raise ValueError("unclosed '('")
    return stack[0]


def _params_used(form: object) -> set[str]:
    if isinstance(form, list):
        if len(form) == 2 and form[0] == "param" and isinstance(form[1], tuple):
            return {form[1][1]}
        return set().union(*(_params_used(f) for f in form)) if form else set()
    return set()


def test_the_profile_matches_the_reviewed_golden_file() -> None:
    profile, _ = _golden_profile()
    assert profile == GOLDEN.read_text()


def test_the_profile_is_well_formed_denies_by_default_and_declares_every_parameter() -> None:
    profile, params = _golden_profile()
    forms = _parse(profile)
    assert forms[0] == ["version", "1"] and forms[1] == ["deny", "default"]
    assert all(f[0] in ("version", "allow", "deny") for f in forms)
    assert _params_used(forms) == {name for name, _ in params}
    # Network is off unless asked for; with it, one rule more.
    assert not any(f[:2] == ["allow", "network*"] for f in forms)
    with_net, _ = seatbelt.profile_and_params(Path("/w"), hidden=[], writable=[], network=True)
    assert ["allow", "network*"] in _parse(with_net)


@pytest.mark.parametrize("name", ['a") (allow default) ("', "line\nbreak", "back\\slash", "(param \"WORKSPACE\")", "sp ace"])
def test_a_hostile_workspace_path_is_a_parameter_never_profile_text(name: str) -> None:
    hostile = f"/Users/dev/{name}"
    profile, params = seatbelt.profile_and_params(Path(hostile), hidden=[], writable=[], network=False)
    plain, _ = seatbelt.profile_and_params(Path("/Users/dev/plain"), hidden=[], writable=[], network=False)
    assert profile == plain  # the path cannot change a single character of the profile
    assert dict(params)["WORKSPACE"] == hostile
    argv = seatbelt.seatbelt_argv(["true"], workspace=Path(hostile), hidden=[], network=False, env={})
    assert f"-DWORKSPACE={hostile}" in argv


def test_constant_strings_are_escaped_and_control_characters_refused() -> None:
    assert seatbelt.sbpl_string('a"b\\c') == '"a\\"b\\\\c"'
    assert _parse(seatbelt.sbpl_string('a"b\\c')) == [("str", 'a"b\\c')]
    with pytest.raises(ValueError):
        seatbelt.sbpl_string("a\nb")


def test_the_argv_runs_the_command_after_the_profile_and_its_parameters(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    ws = home / "project"
    ws.mkdir()
    hidden_solution = tmp_path / "suite" / "task" / "solution"
    policy = ConfinementPolicy(hidden_paths=(str(hidden_solution), str(home)))  # home holds the workspace: kept
    argv = sandboxed_argv(["/bin/bash", "-c", "ls"], SEATBELT, workspace=ws, policy=policy, env={"HOME": str(home)})
    assert argv[:3] == [seatbelt.SANDBOX_EXEC, "-p", argv[2]]
    split = argv.index("--")
    assert argv[split + 1:] == ["/bin/bash", "-c", "ls"]
    params = dict(a[2:].split("=", 1) for a in argv[3:split])
    assert all(a.startswith("-D") for a in argv[3:split])
    assert params["WORKSPACE"] == os.path.realpath(ws)
    hidden = {v for k, v in params.items() if k.startswith("HIDDEN_")}
    assert os.path.realpath(home / ".ssh") in hidden and os.path.realpath(hidden_solution) in hidden
    assert os.path.realpath(home) not in hidden  # never hide the workspace (or a folder holding it)
    assert {v for k, v in params.items() if k.startswith("WRITABLE_")} >= {"/private/tmp", "/private/var/tmp"}


def test_detect_picks_sandbox_exec_on_macos_and_says_why_not(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "sandbox-exec"
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(seatbelt, "SANDBOX_EXEC", str(fake))
    confine.detect.cache_clear()
    try:
        missing = confine.detect()
        assert not missing.confined and "is missing" in missing.detail
        confine.detect.cache_clear()
        fake.write_text("#!/bin/sh\necho 'sandbox-exec: sandbox_apply: Operation not permitted' >&2\nexit 71\n")
        fake.chmod(0o755)
        nested = confine.detect()
        assert not nested.confined and "Operation not permitted" in nested.detail
        confine.detect.cache_clear()
        fake.write_text("#!/bin/sh\nexit 0\n")
        found = confine.detect()
        assert found.kind == "seatbelt" and found.confined and found.program == str(fake)
        assert confine.confinement_notice() is None
    finally:
        confine.detect.cache_clear()


def test_the_shell_tool_runs_its_command_through_sandbox_exec(tmp_path: Path, monkeypatch) -> None:
    # A stand-in for /usr/bin/sandbox-exec (absent on Linux): it records its arguments and runs
    # the command after `--`, so the test sees exactly what the shell tool handed Seatbelt.
    record = tmp_path / "argv.json"
    fake = tmp_path / "sandbox-exec"
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
                    "rest = sys.argv[sys.argv.index('--') + 1:]\nos.execv(rest[0], rest)\n")  # fmt: skip
    fake.chmod(0o755)
    monkeypatch.setattr("hitrate.tools.shell.detect", lambda: Availability("seatbelt", "fake", program=str(fake)))
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = ToolContext(workspace=ws)
    result = ToolRegistry([ShellTool()]).execute("shell", {"command": "echo hi > out.txt; cat out.txt"}, ctx)
    assert "hi" in result.content and result.metadata["sandbox"] == "seatbelt" and result.metadata["confined"]
    handed = json.loads(record.read_text())
    assert handed[0] == "-p" and "(deny default)" in handed[1]
    assert f"-DWORKSPACE={os.path.realpath(ws)}" in handed


@pytest.mark.skipif(sys.platform != "darwin" or not os.access(seatbelt.SANDBOX_EXEC, os.X_OK),
                    reason="needs macOS with /usr/bin/sandbox-exec")  # fmt: skip
def test_on_macos_writes_outside_the_workspace_hidden_reads_git_hooks_and_network_fail(tmp_path: Path) -> None:
    home = Path.home()
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    script = (
        "touch inside && echo ok-inside; "
        f"touch {tmp_path}/outside 2>/dev/null && echo wrote-outside; "
        f"ls {home}/.ssh >/dev/null 2>&1 && echo read-ssh; "
        "echo x >> .git/config 2>/dev/null && echo wrote-git-config; "
        "touch .git/hooks/pre-commit 2>/dev/null && echo planted-hook; "
        f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected"
    )
    argv = sandboxed_argv(["/bin/bash", "-c", script], confine.detect(), workspace=ws, policy=ConfinementPolicy(),
                          env=dict(os.environ))  # fmt: skip
    done = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=60, check=False)
    server.close()
    assert done.stdout.split() == ["ok-inside"], done.stdout + done.stderr
