"""OS confinement for commands the model runs (and for grading): bubblewrap on Linux, Seatbelt
(`sandbox-exec`, see `tools/seatbelt.py`) on macOS.

`confined_argv` wraps a command so that it sees the machine the way Codex and Claude Code let
their shells see it on Linux (both build on bubblewrap):

- the root file system read-only, the workspace read-write, a private empty `/tmp`;
- the user's credential folders (`~/.ssh`, `~/.aws`, ...) and hitrate's own data (the ledger holds
  whole transcripts) replaced by empty folders, plus any path the caller asks to hide;
- no capabilities at all (`--cap-drop ALL`) and, where the kernel allows, a user namespace of its
  own with nested ones refused: started by root, bubblewrap would otherwise hand the command
  CAP_SYS_ADMIN, and `umount /proc` or `mount -o remount,rw /` would undo every other layer;
- a new PID namespace with its own `/proc`: the harness's processes (and their `/proc/<pid>/environ`
  and `cwd`) are out of sight, and when the command's first process ends the kernel kills every
  process left in the namespace, `setsid` and double-fork daemons included;
- `--die-with-parent`: killing the bubblewrap process (the tool's timeout) takes the namespace down;
- no network unless the policy allows it (a new, empty network namespace has only loopback);
- resource limits (address space, process count, file size) set with `prlimit` inside the sandbox,
  and size-bounded `/tmp` and `/dev/shm` (bubblewrap 0.8+: `--size`);
- an environment built from an allowlist of names, never from the harness's own environment.

Where neither works (bubblewrap missing or unable to create namespaces, `sandbox-exec` missing or
refused inside another sandbox), `detect()` says why, and callers must not pretend the command is
confined (the shell tool then asks for approval of every command). `sandboxed_argv` wraps a
command in whichever `detect()` found.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import platformdirs
from pydantic import BaseModel, ConfigDict, Field

from hitrate.tools import sandbox_cgroup, seatbelt
from hitrate.tools.sandbox_cgroup import TreeLimits
from hitrate.tools.trusted_programs import minimal_env, trusted_program

# The only variables a confined command inherits: what tools need to find programs, print text in
# the user's language and know who they run as. Anything else (API keys, PGPASSWORD, DATABASE_URL,
# webhook URLs...) stays out unless the user names it in `ConfinementPolicy.pass_env`; a denylist
# of secret-looking names always misses some.
ALLOWED_ENV_NAMES: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "VIRTUAL_ENV",
)

# Keep commands from waiting on a pager or a password prompt that nobody will answer.
NON_INTERACTIVE_ENV: dict[str, str] = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}

# Credential stores under the home folder, hidden from confined commands. Relative to $HOME.
HIDDEN_HOME_PATHS: tuple[str, ...] = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".cache/huggingface/token",
    ".huggingface/token",
    "Library/Keychains",  # macOS
    # Other coding agents and model clients: their API keys and OAuth tokens.
    ".codex",
    ".claude",
    ".claude.json",
    ".config/openai",
    ".config/anthropic",
    ".config/github-copilot",
    ".gemini",
    # Package registries and build tools.
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".gem/credentials",
    ".config/pip",
    ".composer/auth.json",
    ".config/composer/auth.json",
    ".nuget/NuGet/NuGet.Config",
    ".terraform.d/credentials.tfrc.json",
    ".config/containers/auth.json",
    # Clouds and secret stores.
    ".vault-token",
    ".boto",
    ".s3cfg",
    ".config/rclone",
    ".oci",
    ".config/doctl",
    ".config/hcloud",
    ".config/op",
    ".password-store",
    ".local/share/keyrings",
    ".config/git/credentials",
    ".env",
    # Shell start-up files (`export KEY=...`) and shell and client histories (typed passwords).
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".config/fish",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
    ".sqlite_history",
    ".rediscli_history",
    ".lesshst",
    ".viminfo",
)

# hitrate's ledger and config when moved out of its own folders (`$HITRATE_DB`, `$HITRATE_CONFIG`).
_MOVED_FILE_VARIABLES = ("HITRATE_DB", "HITRATE_CONFIG")
# SQLite's files beside a ledger, and the spool of rows a full disk kept out of it.
_LEDGER_SIDECARS = ("", "-wal", "-shm", "-journal", ".spool.jsonl")
# Files the running program asked to hide from every command (`hide_from_commands`): a ledger
# opened with `--db`.
_hidden_this_process: set[str] = set()


def hide_from_commands(*paths: str | os.PathLike[str]) -> None:
    """Hide `paths` (and a ledger's SQLite sidecars) from every command this process confines
    from now on: a ledger or config file chosen on the command line."""
    for path in paths:
        _hidden_this_process.update(os.path.abspath(f"{os.fspath(path)}{suffix}") for suffix in _LEDGER_SIDECARS)


class ConfinementPolicy(BaseModel):
    """What a confined command may do beyond reading the system and writing its workspace."""

    model_config = ConfigDict(frozen=True)

    network: bool = Field(default=False, description="Share the host's network (off: loopback only).")
    max_memory_bytes: int | None = Field(
        default=8 * 1024**3, ge=16 * 1024**2, description="Address-space limit per process (RLIMIT_AS)."
    )
    max_processes: int | None = Field(
        default=512, ge=8, description="Processes the command may add for its user (RLIMIT_NPROC)."
    )
    max_file_bytes: int | None = Field(
        default=4 * 1024**3, ge=1024, description="Largest file a process may write (RLIMIT_FSIZE)."
    )
    max_tree_processes: int | None = Field(
        default=1024, ge=8, description="Processes and threads of the whole command together (cgroup pids.max, where available)."
    )
    max_tree_memory_bytes: int | None = Field(
        default=8 * 1024**3, ge=16 * 1024**2,
        description="Memory of the whole command together, its /tmp included (cgroup memory.max, where available).",
    )
    tmpfs_bytes: int | None = Field(
        default=1024**3, ge=1024**2, description="Size of the private /tmp and of /dev/shm, each (bubblewrap 0.8+)."
    )
    pass_env: tuple[str, ...] = Field(
        default=(), description="Extra variable names (fnmatch patterns) passed through to commands."
    )
    hidden_paths: tuple[str, ...] = Field(
        default=(), description="Absolute paths replaced by an empty folder (or file) inside the sandbox."
    )
    read_only_paths: tuple[str, ...] = Field(
        default=(), description="Absolute paths inside the workspace that the command may read but not change."
    )


@dataclass(frozen=True)
class Availability:
    """Whether commands can be confined on this machine, and by what (or why not)."""

    kind: str  # "bubblewrap", "seatbelt" or "none"
    detail: str  # what was found, or why nothing can confine commands here
    program: str | None = None  # the bwrap or sandbox-exec executable to run
    # bubblewrap options this machine's bwrap was seen to accept: "userns" (a user namespace of the
    # sandbox's own), "disable-userns" (none nested in it), "size" (bounded tmpfs).
    features: frozenset[str] = frozenset()

    @property
    def confined(self) -> bool:
        return self.kind != "none"


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def allowed_env(env: Mapping[str, str], pass_env: Sequence[str] = ()) -> tuple[dict[str, str], list[str]]:
    """The allowlisted part of `env` with the non-interactive settings, and the sorted withheld names."""
    patterns = (*ALLOWED_ENV_NAMES, *pass_env)
    kept = {name: value for name, value in env.items() if _matches(name, patterns)}
    withheld = sorted(name for name in env if name not in kept)
    kept.update(NON_INTERACTIVE_ENV)
    return kept, withheld


@functools.lru_cache(maxsize=1)
def detect() -> Availability:
    """Find the OS sandbox and check that it can actually confine a command here: bubblewrap on
    Linux (user namespaces may be disabled, e.g. by AppArmor on Ubuntu 24.04 or inside some
    containers), `/usr/bin/sandbox-exec` on macOS (it refuses to run inside another sandbox).
    Cached per process."""
    if sys.platform == "darwin":
        return _detect_seatbelt()
    if not sys.platform.startswith("linux"):
        return Availability("none", f"no supported sandbox on {sys.platform} (bubblewrap on Linux, sandbox-exec on macOS)")
    bwrap = trusted_program("bwrap")  # never from PATH: a planted bwrap would confine nothing
    if bwrap is None:
        return Availability("none", "bubblewrap (bwrap) is not installed in a system folder; install the 'bubblewrap' package")
    base = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
            "--unshare-net", "--die-with-parent", "--cap-drop", "ALL"]  # fmt: skip
    probe = [*base, "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=20, env=minimal_env(), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability("none", f"bubblewrap at {bwrap} could not run: {exc}")
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", errors="replace").strip()[:300] or f"exit status {done.returncode}"
        return Availability("none", f"bubblewrap at {bwrap} cannot create a sandbox here: {why}")
    features = _bwrap_features(bwrap, base)
    detail = f"bubblewrap at {bwrap}" + ("" if "userns" in features else " (no user namespace: capabilities dropped only)")
    return Availability("bubblewrap", detail, program=bwrap, features=features)


def _bwrap_features(bwrap: str, base: Sequence[str]) -> frozenset[str]:
    """Which optional isolation this bwrap accepts here, each tried once."""
    tries = {
        "userns": ["--unshare-user"],
        "disable-userns": ["--unshare-user", "--disable-userns"],
        "size": ["--size", str(1024**2), "--tmpfs", "/tmp"],
    }
    found: set[str] = set()
    for name, extra in tries.items():
        try:
            done = subprocess.run([*base, *extra, "--", "/bin/sh", "-c", "exit 0"], capture_output=True,
                                  timeout=20, env=minimal_env(), check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            found.add(name)
    return frozenset(found)


def _detect_seatbelt() -> Availability:
    program = seatbelt.SANDBOX_EXEC  # never from PATH: a planted sandbox-exec would confine nothing
    if not (os.path.isfile(program) and os.access(program, os.X_OK)):
        return Availability("none", f"{program} is missing; macOS ships it, so this system was changed")
    probe = [program, "-p", "(version 1)\n(allow default)\n", "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=20, env={"PATH": os.defpath}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability("none", f"sandbox-exec at {program} could not run: {exc}")
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", errors="replace").strip()[:300] or f"exit status {done.returncode}"
        return Availability("none", f"sandbox-exec at {program} cannot confine commands here: {why}")
    return Availability("seatbelt", f"sandbox-exec (Seatbelt) at {program}", program=program)


def sandboxed_argv(
    argv: Sequence[str],
    found: Availability,
    *,
    workspace: Path,
    policy: ConfinementPolicy,
    env: Mapping[str, str],
    cwd: Path | None = None,
) -> list[str]:
    """`argv` wrapped in the sandbox `detect()` found (`argv` itself when there is none). With
    Seatbelt the caller starts the command in `cwd`; bubblewrap changes into it itself."""
    if found.kind == "bubblewrap" and found.program:
        return confined_argv(argv, workspace=workspace, policy=policy, env=env, bwrap=found.program, cwd=cwd,
                             features=found.features)  # fmt: skip
    if found.kind == "seatbelt" and found.program:
        return seatbelt_argv(argv, workspace=workspace, policy=policy, env=env, program=found.program)
    return list(argv)


def tree_limits(found: Availability, policy: ConfinementPolicy) -> contextlib.AbstractContextManager[TreeLimits]:
    """A cgroup for one command's whole process tree while the block runs (`sandbox_cgroup`); on
    macOS or where no cgroup can be written, none (`TreeLimits.detail` says why)."""
    if found.kind != "bubblewrap":
        return contextlib.nullcontext(TreeLimits(detail=f"no cgroups with {found.kind}"))
    return sandbox_cgroup.enter(policy.max_tree_processes, policy.max_tree_memory_bytes)


def seatbelt_argv(
    argv: Sequence[str], *, workspace: Path, policy: ConfinementPolicy, env: Mapping[str, str],
    program: str = seatbelt.SANDBOX_EXEC,
) -> list[str]:  # fmt: skip
    """`argv` under `sandbox-exec`, hiding what bubblewrap hides; no resource limits (macOS has no
    prlimit and does not enforce RLIMIT_AS)."""
    root = Path(os.path.realpath(workspace))
    hidden: list[str] = []
    for path in (*_hidden_defaults(env), *policy.hidden_paths):
        real = os.path.realpath(path)
        if Path(real) == root or Path(real) in root.parents or real in hidden:
            continue  # never hide the workspace itself
        hidden.append(real)
    return seatbelt.seatbelt_argv(argv, workspace=root, hidden=hidden, network=policy.network, env=env, program=program)


def confinement_notice() -> str | None:
    """What a front end tells the user at start and in its summary when shell commands run
    unconfined; None when the OS sandbox works."""
    found = detect()
    if found.confined:
        return None
    return (
        f"shell commands are NOT confined on this machine ({found.detail}): each one needs your "
        "approval, and runs without approval are refused"
    )


def _hidden_defaults(env: Mapping[str, str]) -> list[str]:
    home = env.get("HOME") or os.path.expanduser("~")
    paths = [os.path.join(home, rel) for rel in HIDDEN_HOME_PATHS]
    # hitrate's own files: the ledger and session logs hold whole transcripts, the config may hold keys.
    for folder in (platformdirs.user_data_dir("hitrate", appauthor=False),
                   platformdirs.user_config_dir("hitrate", appauthor=False),
                   platformdirs.user_state_dir("hitrate", appauthor=False)):  # fmt: skip
        paths.append(folder)
    for name in _MOVED_FILE_VARIABLES:
        moved = os.environ.get(name)
        if moved:
            paths += [f"{os.path.abspath(moved)}{suffix}" for suffix in _LEDGER_SIDECARS]
    paths += sorted(_hidden_this_process)
    return paths


def _hiding_args(paths: Sequence[str], keep: Path, features: frozenset[str]) -> list[str]:
    """Mounts hiding `paths`; one under a folder already hidden needs none (and could get none: the
    empty folder over it is read-only)."""
    args: list[str] = []
    folders: list[Path] = []
    for path in paths:
        real = Path(os.path.realpath(path))
        if any(real == folder or folder in real.parents for folder in folders):
            continue
        hide = _hide_args(str(real), keep, features)
        if hide and hide[-2] == "--remount-ro":
            folders.append(real)
        args += hide
    return args


def _hide_args(path: str, keep: Path, features: frozenset[str] = frozenset()) -> list[str]:
    real = os.path.realpath(path)
    if not os.path.lexists(real):
        return []
    if Path(real) == keep or keep in Path(real).parents:
        return []  # never hide the workspace itself
    if os.path.isdir(real):
        # An empty folder that cannot be written: no room to fill, nothing to find.
        size = ["--size", str(64 * 1024)] if "size" in features else []
        return [*size, "--tmpfs", real, "--remount-ro", real]
    return ["--ro-bind", "/dev/null", real]


def _git_guard_args(root: Path) -> list[str]:
    """Read-only binds over the repository's `.git/config` and `.git/hooks`: a command may commit,
    but cannot plant a hook or a `core.fsmonitor` that runs when the user (or hitrate) next runs git.
    A missing hooks folder is created first, so there is something to bind over."""
    git = root / ".git"
    if git.is_symlink() or not git.is_dir():
        return []  # a worktree's or submodule's .git file points outside: already read-only
    hooks = git / "hooks"
    if not hooks.exists() and not hooks.is_symlink():
        hooks.mkdir()
    args: list[str] = []
    for path in (git / "config", hooks):
        if path.exists() and not path.is_symlink():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _runtime_under_tmp() -> list[str]:
    """This interpreter's installation folders that lie under /tmp (outermost first, no repeats)."""
    found: list[str] = []
    for path in (sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))):
        real = os.path.realpath(path)
        if real.startswith("/tmp/") and not any(real == f or real.startswith(f + "/") for f in found):
            found.append(real)
    return sorted(found, key=len)


def confined_argv(
    argv: Sequence[str],
    *,
    workspace: Path,
    policy: ConfinementPolicy,
    env: Mapping[str, str],
    bwrap: str,
    cwd: Path | None = None,
    features: frozenset[str] = frozenset({"userns", "disable-userns", "size"}),
) -> list[str]:
    """`argv` wrapped in bubblewrap with `workspace` as its only writable folder; it starts in
    `cwd` (default: the workspace)."""
    root = Path(os.path.realpath(workspace))
    # Sized tmpfs where bwrap can size them: otherwise each may grow to half the machine's memory,
    # outside every per-process limit.
    sized = ["--size", str(policy.tmpfs_bytes)] if policy.tmpfs_bytes and "size" in features else []
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", *sized, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--proc", "/proc", *sized, "--tmpfs", "/tmp"]  # fmt: skip
    for path in _runtime_under_tmp():
        # The private /tmp would hide an interpreter installed there (a virtual environment in a
        # checkout under /tmp): it stays visible, read-only.
        args += ["--ro-bind", path, path]
    args += _hiding_args((*_hidden_defaults(env), *policy.hidden_paths), root, features)
    args += ["--bind", str(root), str(root)]
    args += _git_guard_args(root)
    for path in policy.read_only_paths:
        real = os.path.realpath(path)
        if os.path.exists(real):
            args += ["--ro-bind", real, real]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if "userns" in features:
        # Root outside stays uid 0 inside, but of a namespace that owns nothing of the host's; the
        # mounts bubblewrap made become locked to it, so none can be undone to show what lies below.
        args.append("--unshare-user")
        if "disable-userns" in features:
            args.append("--disable-userns")  # no nested namespace in which to regain capabilities
    # No capabilities, whoever started bubblewrap: root's CAP_SYS_ADMIN would let the command
    # unmount /proc (the host's, with the harness's environ, is below) or remount / read-write.
    args += ["--cap-drop", "ALL"]
    if not policy.network:
        args.append("--unshare-net")
    # --new-session: the command cannot push keystrokes into the user's terminal (TIOCSTI).
    start = Path(os.path.realpath(cwd)) if cwd is not None else root
    args += ["--die-with-parent", "--new-session", "--chdir", str(start), "--"]
    return [*args, *limit_argv(policy), *argv]


def _count_user_processes(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


def limit_argv(policy: ConfinementPolicy) -> list[str]:
    """A `prlimit` prefix that applies the policy's resource limits (soft = hard, so the command
    cannot raise them again); empty when util-linux's prlimit is missing or nothing is limited.

    RLIMIT_NPROC counts every process of the user, so the limit is what the user runs now plus the
    allowance. The kernel does not apply it to root. (prlimit rather than a `preexec_fn`: the
    harness runs tools from worker threads, where forking Python code before exec can deadlock.)
    """
    prlimit = trusted_program("prlimit")
    if prlimit is None:
        return []
    flags: list[str] = []
    if policy.max_memory_bytes is not None:
        flags.append(f"--as={policy.max_memory_bytes}")
    if policy.max_processes is not None and os.getuid() != 0:
        nproc = _count_user_processes(os.getuid()) + policy.max_processes
        flags.append(f"--nproc={nproc}")
    if policy.max_file_bytes is not None:
        flags.append(f"--fsize={policy.max_file_bytes}")
    return [prlimit, *flags, "--"] if flags else []
