"""Running the shell tool's commands inside a task's container instead of the host sandbox.

A Terminal-Bench / Harbor task is set in its own container image: the agent's commands must see
that image's programs and files, not the host's. The workspace folder the file tools work on is
bind-mounted at the container's working directory, so both views stay one tree.

The command runs as `<runtime> exec -w WORKDIR CONTAINER sh -c PRELUDE sh SECONDS COMMAND`. The
prelude runs the command under the image's `timeout` (killing the client with `exec` would leave
the command running inside the container), and under bash when the image has one (most Harbor
tasks' instructions and solutions assume bash), else under sh. The container's own environment
applies: the host's variables (and its secrets) never reach it.
"""

from __future__ import annotations

from dataclasses import dataclass

# $1: the time limit in seconds, $2: the command. `timeout -k` sends SIGKILL a few seconds after
# the SIGTERM; an image without `timeout` still runs the command, and the client's own deadline
# then stops the exec.
_PRELUDE = (
    'if command -v bash >/dev/null 2>&1; then shell=bash; else shell=sh; fi; '
    'if command -v timeout >/dev/null 2>&1; then exec timeout -k 5 "$1" "$shell" -c "$2"; fi; '
    'exec "$shell" -c "$2"'
)


# When it fires, coreutils' `timeout` exits 124 (137 if it needed SIGKILL); busybox's exits 143
# (the command's SIGTERM status).
_TIMEOUT_EXITS = frozenset({124, 137, 143})


def _seconds(timeout_s: float) -> int:
    return max(1, int(timeout_s))


def ran_out(exit_code: int | None, elapsed_s: float, timeout_s: float) -> bool:
    """Whether a command run by `ContainerShell.argv` ended because its `timeout` fired: the
    exit status says so only together with the time it took (a command may exit 124 itself)."""
    return exit_code in _TIMEOUT_EXITS and elapsed_s >= _seconds(timeout_s) - 0.5


@dataclass(frozen=True)
class ContainerShell:
    """Where shell commands run: a started container of a container runtime (docker or podman)."""

    program: str
    """The runtime's CLI (an absolute path to docker or podman)."""
    container: str
    """The container's id or name."""
    workdir: str
    """The working directory inside the container (where the workspace is mounted)."""

    def argv(self, command: str, timeout_s: float) -> list[str]:
        seconds = str(_seconds(timeout_s))
        return [self.program, "exec", "-w", self.workdir, self.container, "sh", "-c", _PRELUDE, "sh", seconds, command]

    def describe(self) -> str:
        return f"container {self.container[:12]} ({self.workdir})"
