"""OS confinement on macOS: a Seatbelt profile run with `/usr/bin/sandbox-exec`.

The profile is built the way Codex (`codex-rs/sandboxing/src/seatbelt.rs`, its
`seatbelt_base_policy.sbpl`) and Claude Code's sandbox runtime (`src/sandbox/macos-sandbox-utils.ts`
in anthropic-experimental/sandbox-runtime) build theirs:

- `(deny default)`, then only what a shell and its tools need: run programs, fork, signal and
  inspect processes of the same sandbox, read user preferences and a short list of sysctls, the
  directory service (user names), POSIX semaphores and shared memory (Python multiprocessing);
- reads everywhere except the hidden paths (credential folders, hitrate's own data, what the caller
  hides), written as `(require-all (subpath "/") (require-not (subpath ...)) ...)`;
- writes only beneath the workspace and the temporary folders, minus `.git/config` and
  `.git/hooks` (a hook or `core.fsmonitor` would run when the user next runs git), and the
  workspace's `.git` cannot be renamed away to edit it under another name;
- no network unless the policy allows it.

Every path the caller supplies travels as a `-D NAME=value` parameter and is named in the profile
as `(param "NAME")`, as Codex does: a workspace called `a") (allow default` is a string to
Seatbelt, never profile text. `sandbox-exec` is taken from `/usr/bin` only, never from PATH.

What Seatbelt does not give, and bubblewrap does: a private `/tmp` (the real one is writable), a
PID namespace (a `setsid` daemon survives the command; the process group is still killed), and
resource limits (`prlimit` is Linux-only; macOS does not enforce RLIMIT_AS).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

SANDBOX_EXEC = "/usr/bin/sandbox-exec"

# Granted to every confined command: what a shell, git, compilers and Python need on macOS. From
# Codex's base policy, which takes it from Chrome's renderer sandbox.
BASE_RULES = """\
(version 1)
(deny default)

; processes: run programs and fork; see and signal only processes of this sandbox
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))

; CFPreferences, user and group names (opendirectoryd), Python multiprocessing's semaphores,
; the host's CPU facts (libuv's os.cpus()), power management state
(allow user-preference-read)
(allow mach-host*)
(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))
(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))
(allow mach-lookup (global-name "com.apple.PowerManagement.control"))
(allow ipc-posix-sem)
(allow ipc-posix-shm)

; the system facts programs ask for (CPU count, page size, OS version)
(allow sysctl-read
  (sysctl-name "hw.activecpu")
  (sysctl-name "hw.byteorder")
  (sysctl-name "hw.cachelinesize_compat")
  (sysctl-name "hw.cpufamily")
  (sysctl-name "hw.cputype")
  (sysctl-name "hw.logicalcpu")
  (sysctl-name "hw.logicalcpu_max")
  (sysctl-name "hw.machine")
  (sysctl-name "hw.memsize")
  (sysctl-name "hw.ncpu")
  (sysctl-name "hw.nperflevels")
  (sysctl-name "hw.pagesize")
  (sysctl-name "hw.pagesize_compat")
  (sysctl-name "hw.physicalcpu")
  (sysctl-name "hw.physicalcpu_max")
  (sysctl-name-prefix "hw.optional.")
  (sysctl-name-prefix "hw.perflevel")
  (sysctl-name "kern.argmax")
  (sysctl-name "kern.hostname")
  (sysctl-name "kern.maxfilesperproc")
  (sysctl-name "kern.maxproc")
  (sysctl-name "kern.osproductversion")
  (sysctl-name "kern.osrelease")
  (sysctl-name "kern.ostype")
  (sysctl-name "kern.osvariant_status")
  (sysctl-name "kern.osversion")
  (sysctl-name "kern.secure_kernel")
  (sysctl-name "kern.usrstack64")
  (sysctl-name "kern.version")
  (sysctl-name-prefix "kern.proc.pgrp.")
  (sysctl-name-prefix "kern.proc.pid.")
  (sysctl-name "machdep.cpu.brand_string")
  (sysctl-name "sysctl.proc_cputype")
  (sysctl-name "vm.loadavg"))

; the null and random devices, the controlling terminal, and the command's own standard streams
; (`echo x > /dev/stderr`, `tee /dev/stdout` open them by name)
(allow file-read* file-write* file-ioctl
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/random")
  (literal "/dev/urandom")
  (literal "/dev/tty")
  (literal "/dev/stdin")
  (literal "/dev/stdout")
  (literal "/dev/stderr")
  (subpath "/dev/fd"))
"""

# /tmp and /var are links to /private/...: Seatbelt matches resolved paths.
TEMP_ROOTS: tuple[str, ...] = ("/private/tmp", "/private/var/tmp")


def sbpl_string(text: str) -> str:
    """`text` as an SBPL (Scheme) string literal. Only constants are written this way; paths go
    in as parameters."""
    if any(ord(c) < 0x20 for c in text):
        raise ValueError(f"control character in a Seatbelt string: {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


def temp_roots(env: Mapping[str, str]) -> list[str]:
    """Where a confined command may write besides the workspace: /tmp, /var/tmp, and the per-user
    temporary folder macOS puts in $TMPDIR (/var/folders/xx/.../T)."""
    roots = list(TEMP_ROOTS)
    user_tmp = _real(env.get("TMPDIR") or tempfile.gettempdir())
    if user_tmp.startswith("/private/var/folders/") and user_tmp not in roots:
        roots.append(user_tmp)
    return roots


def profile_and_params(
    workspace: Path, *, hidden: Sequence[str], writable: Sequence[str], network: bool
) -> tuple[str, list[tuple[str, str]]]:
    """The profile text and its parameters (name, value) for a command confined to `workspace`."""
    root = _real(workspace)
    params: list[tuple[str, str]] = [("WORKSPACE", root)]
    lines = [BASE_RULES]

    lines.append("; reads: everything but the hidden paths")
    read = ['(subpath "/")']
    for index, path in enumerate(hidden):
        name = f"HIDDEN_{index}"
        params.append((name, _real(path)))
        read.append(f'(require-not (subpath (param "{name}")))')
    lines.append("(allow file-read*\n  (require-all\n    " + "\n    ".join(read) + "))")

    lines.append("; writes: the workspace but its git config and hooks, and the temporary folders")
    git = Path(root) / ".git"
    params += [("GIT_DIR", str(git)), ("GIT_CONFIG", str(git / "config")), ("GIT_HOOKS", str(git / "hooks"))]
    write = [
        '(require-all (subpath (param "WORKSPACE"))'
        ' (require-not (literal (param "GIT_CONFIG")))'
        ' (require-not (literal (param "GIT_HOOKS")))'
        ' (require-not (subpath (param "GIT_HOOKS"))))'
    ]
    for index, path in enumerate(writable):
        name = f"WRITABLE_{index}"
        params.append((name, _real(path)))
        write.append(f'(subpath (param "{name}"))')
    lines.append("(allow file-write*\n  " + "\n  ".join(write) + ")")
    # Renaming .git (or the workspace) away, editing its config and renaming it back would escape
    # the rule above, which matches paths, not files.
    lines.append('(deny file-write-unlink (literal (param "GIT_DIR")) (literal (param "WORKSPACE")))')

    lines.append("; network")
    lines.append("(allow network*)" if network else "; none: no sockets but the ones inherited")
    return "\n".join(lines) + "\n", params


def seatbelt_argv(
    argv: Sequence[str],
    *,
    workspace: Path,
    hidden: Sequence[str],
    network: bool,
    env: Mapping[str, str],
    program: str = SANDBOX_EXEC,
) -> list[str]:
    """`argv` run under `sandbox-exec` with the profile for `workspace`. The command's working
    folder is the caller's to set (sandbox-exec has no option for it)."""
    profile, params = profile_and_params(workspace, hidden=hidden, writable=temp_roots(env), network=network)
    return [program, "-p", profile, *(f"-D{name}={value}" for name, value in params), "--", *argv]
