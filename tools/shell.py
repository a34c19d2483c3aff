"""shell: run one command in the workspace, confined by the OS sandbox, bounded in time and output.

The command runs in a new session (so a new process group). On timeout, or as soon as the user
cancels (the context's cancel event, polled while the command runs), the whole group gets SIGTERM,
then SIGKILL after a grace period: killing only the shell would leave its children running and
holding the output pipe open, which is how a `sleep 1000 &` hangs naive harnesses. When the command
finishes normally, whatever it left running in its group is killed too, so no call leaks processes
into the next one.

Where bubblewrap works, the command runs inside it (`confine.py`): the workspace is the only
writable folder besides a private /tmp, and its PID namespace takes every descendant down with it,
`setsid` daemons included. Where it does not, each command needs the user's approval. Either way
the command's environment is an allowlist, never the harness's own.
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from pydantic import Field

from hitrate.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolResult, refused
from hitrate.tools.confine import allowed_env, detect, sandboxed_argv, tree_limits
from hitrate.tools.container_shell import ContainerShell, ran_out

POLL_S = 0.05
DRAIN_AFTER_EXIT_S = 1.0

# The approval asked for a shell command that no OS sandbox confines: a front end must ask the
# user for it even when it lets confined commands and file edits through without asking.
UNCONFINED_SHELL = "shell (unconfined)"


class CappedOutput:
    """Keeps the first and last halves of a byte stream within a cap, counting what falls between."""

    def __init__(self, max_bytes: int) -> None:
        self.head_cap = max_bytes // 2
        self.tail_cap = max_bytes - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.cut_bytes = 0
        self.cut_lines = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            self.cut_bytes += excess
            self.cut_lines += self.tail.count(b"\n", 0, excess)
            del self.tail[:excess]

    def render(self) -> str:
        if not self.cut_bytes:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        head, tail = bytes(self.head), bytes(self.tail)
        cut_bytes, cut_lines = self.cut_bytes, self.cut_lines
        # Cut on line boundaries where one is near, so no half line is shown on either side.
        newline = head.rfind(b"\n")
        if newline >= len(head) * 3 // 4:
            cut_bytes += len(head) - newline - 1
            head = head[: newline + 1]
        newline = tail.find(b"\n")
        if 0 <= newline < len(tail) // 4:
            cut_bytes += newline + 1
            cut_lines += 1
            tail = tail[newline + 1 :]
        note = (
            f"[... {cut_bytes:,} bytes ({cut_lines:,} lines) cut from the middle of "
            f"{self.total:,} bytes of output ...]"
        )
        text_head = head.decode("utf-8", errors="replace")
        sep = "" if text_head.endswith("\n") or not text_head else "\n"
        return f"{text_head}{sep}{note}\n{tail.decode('utf-8', errors='replace')}"


@dataclass(frozen=True)
class CommandOutcome:
    output: str
    exit_code: int | None  # negative: killed by that signal
    timed_out: bool
    output_bytes: int
    cut_bytes: int
    cancelled: bool = False


def _leader_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the shell exited, without reaping it: while unreaped its pid cannot be reused, so
    signalling its process group afterwards cannot hit an unrelated process."""
    if hasattr(os, "waitid"):
        try:
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None and info.si_pid != 0
    return proc.poll() is not None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_s: float,
    max_output_bytes: int,
    kill_grace_s: float = 2.0,
    cancel: threading.Event | None = None,
    pass_fds: Sequence[int] = (),
) -> CommandOutcome:
    """Run argv in a new session, bounded in time and output; every process of its group is
    killed when it ends, times out or is cancelled. `pass_fds`: descriptors the command inherits
    (grading's verdict pipe)."""
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except OSError as exc:
        raise ToolError(f"could not start the shell: {exc}") from exc
    assert proc.stdout is not None
    pgid = proc.pid  # start_new_session: the shell leads its own group
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    output = CappedOutput(max_output_bytes)
    deadline = time.monotonic() + timeout_s
    timed_out = False
    cancelled = False
    kill_at: float | None = None
    drain_until: float | None = None
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            eof = False
            while True:
                now = time.monotonic()
                if drain_until is None and _leader_exited(proc):
                    _signal_group(pgid, signal.SIGKILL)  # leftovers of a finished (or killed) command
                    drain_until = now + DRAIN_AFTER_EXIT_S
                elif drain_until is None and not (timed_out or cancelled) and now >= deadline:
                    timed_out = True
                    _signal_group(pgid, signal.SIGTERM)
                    kill_at = now + kill_grace_s
                elif drain_until is None and not (timed_out or cancelled) and cancel is not None and cancel.is_set():
                    cancelled = True
                    _signal_group(pgid, signal.SIGTERM)
                    kill_at = now + kill_grace_s
                if kill_at is not None and now >= kill_at:
                    _signal_group(pgid, signal.SIGKILL)
                    kill_at = None
                if drain_until is not None and (eof or now >= drain_until):
                    # Past the drain time a process that left the group still holds the pipe.
                    break
                if eof:
                    # The command closed its output but is still running: wait for it (or the deadline).
                    time.sleep(POLL_S)
                    continue
                for _key, _events in selector.select(timeout=POLL_S):
                    try:
                        chunk = os.read(fd, 65536)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        eof = True
                        selector.unregister(fd)
                        break
                    output.feed(chunk)
    finally:
        if drain_until is None:
            # Interrupted (e.g. the harness was cancelled): nothing of this command may live on.
            _signal_group(pgid, signal.SIGKILL)
        proc.stdout.close()
        exit_code = proc.wait()
    return CommandOutcome(
        output=output.render(),
        exit_code=exit_code,
        timed_out=timed_out,
        output_bytes=output.total,
        cut_bytes=output.cut_bytes,
        cancelled=cancelled,
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class ShellArgs(ToolArgs):
    command: str = Field(description="Command line run by bash -c with the workspace root as working directory.")
    timeout_s: int = Field(
        default=120,
        ge=1,
        le=1800,
        description="Seconds before the command and every process it started are killed.",
    )


class ShellTool(Tool[ShellArgs]):
    name = "shell"
    description = (
        "Run a shell command in the workspace and return its combined stdout and stderr and its exit "
        "code. Standard input is empty; long output keeps its beginning and end. Processes the command "
        "leaves in the background are stopped when it finishes. API keys, tokens and other secrets are "
        "not in its environment."
    )
    args_model = ShellArgs

    def run(self, args: ShellArgs, ctx: ToolContext) -> ToolResult:
        if not args.command.strip():
            raise ToolError("command is empty")
        if "\x00" in args.command:
            raise ToolError("command contains a NUL byte")
        if ctx.container is not None:
            return self._run_in_container(args, ctx, ctx.container)
        sandbox = detect()
        if sandbox.confined or ctx.allow_unconfined_shell:
            if not ctx.approved(self.name, args):
                return refused(self.name)
        else:
            # Without an OS sandbox the command could read and write anything the user can: only a
            # person who has seen it may let it run, whatever the approval setting for other tools.
            if ctx.approve is None or not ctx.approve(UNCONFINED_SHELL, args.model_dump(mode="json")):
                return ToolResult(
                    content=(
                        f"shell is not confined on this machine ({sandbox.detail}); every command needs "
                        "the user's approval, and this one was not approved. Nothing was run."
                    ),
                    is_error=True,
                    metadata={"refused": True, "confined": False},
                )
        base_env = os.environ if ctx.env is None else ctx.env
        env, withheld = allowed_env(base_env, ctx.confinement.pass_env)
        env["TMPDIR"] = "/tmp"
        bash = shutil.which("bash", path=env.get("PATH")) or "/bin/sh"
        argv = [bash, "-c", args.command]
        argv = sandboxed_argv(argv, sandbox, workspace=ctx.sandbox.root, policy=ctx.confinement, env=env)
        timeout = min(float(args.timeout_s), ctx.limits.shell_max_timeout_s)
        with tree_limits(sandbox, ctx.confinement) as tree:
            outcome = run_command(
                [*tree.prefix, *argv],
                cwd=str(ctx.sandbox.root),
                env=env,
                timeout_s=timeout,
                max_output_bytes=ctx.limits.output_max_chars,
                kill_grace_s=ctx.limits.shell_kill_grace_s,
                cancel=ctx.cancel,
            )
        metadata = {"withheld_env": withheld, "confined": sandbox.confined, "sandbox": sandbox.kind, "tree_limits": tree.kind}
        return self._result(outcome, timeout, metadata)

    def _run_in_container(self, args: ShellArgs, ctx: ToolContext, container: ContainerShell) -> ToolResult:
        # The container is the confinement: the command sees the task image, the mounted
        # workspace and nothing else of the host, so it needs no more approval than a sandboxed one.
        if not ctx.approved(self.name, args):
            return refused(self.name)
        timeout = min(float(args.timeout_s), ctx.limits.shell_max_timeout_s)
        # The client only carries the output: the container's own `timeout` stops the command, and
        # the client's deadline (a little later) covers an image without one.
        started = time.monotonic()
        outcome = run_command(
            container.argv(args.command, timeout),
            cwd=str(ctx.sandbox.root),
            env=_client_env(),
            timeout_s=timeout + 10.0,
            max_output_bytes=ctx.limits.output_max_chars,
            kill_grace_s=ctx.limits.shell_kill_grace_s,
            cancel=ctx.cancel,
        )
        if not outcome.timed_out and ran_out(outcome.exit_code, time.monotonic() - started, timeout):
            outcome = dataclasses.replace(outcome, timed_out=True)
        return self._result(outcome, timeout, {"confined": True, "sandbox": "container", "container": container.describe()})

    def _result(self, outcome: CommandOutcome, timeout: float, metadata: dict[str, object]) -> ToolResult:
        text = outcome.output if outcome.output else "(no output)\n"
        if not text.endswith("\n"):
            text += "\n"
        if outcome.timed_out:
            text += f"[timed out after {timeout:g} s: the command and every process it started were killed]"
        elif outcome.cancelled:
            text += "[cancelled by the user: the command and every process it started were stopped]"
        elif outcome.exit_code is not None and outcome.exit_code < 0:
            text += f"[killed by signal {_signal_name(-outcome.exit_code)}]"
        else:
            text += f"[exit code {outcome.exit_code}]"
        return ToolResult(
            content=text,
            is_error=outcome.timed_out or outcome.cancelled,
            metadata={
                "exit_code": outcome.exit_code,
                "timed_out": outcome.timed_out,
                "cancelled": outcome.cancelled,
                "output_bytes": outcome.output_bytes,
                "cut_bytes": outcome.cut_bytes,
                **metadata,
            },
        )


def _client_env() -> dict[str, str]:
    """The runtime client's environment: what it needs to find its daemon or storage, no secrets
    (the command inside gets the container's environment, not this one)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
            "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "CONTAINER_HOST", "CONTAINERS_CONF",
            "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF")  # fmt: skip
    return {name: os.environ[name] for name in keep if name in os.environ}
