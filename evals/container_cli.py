"""A container runtime driven through its CLI: docker and podman take the same commands.

Only what a benchmark task needs: build an image from a folder (once per content: a second build
of the same environment is a cache hit), start a long-lived container from it, run commands in
it, copy files in and out, and remove it. Every call is bounded in time; a failure raises
`ContainerError` with the runtime's own message, which becomes the task's infra_error.

The CLI rather than a client library: docker-py speaks only to a docker daemon, while `podman`
(daemonless, the runtime most CI machines can install) takes the same command lines.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hitrate.tools.container_shell import ContainerShell, ran_out

OUTPUT_TAIL = 4000
LABEL = "hitrate.task"
# Keeps a started container alive until it is removed, on any image with a POSIX shell.
KEEP_ALIVE = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]

_BUILD_LOCKS: dict[str, threading.Lock] = {}
_BUILD_LOCKS_GUARD = threading.Lock()


class ContainerError(RuntimeError):
    """The container runtime refused or failed a step (the message says which, and why)."""


@dataclass(frozen=True)
class ExecResult:
    exit_code: int | None
    """None when the command ran past its time limit."""
    output: str
    timed_out: bool


def content_hash(folder: Path) -> str:
    """A digest of every file's relative path, mode and bytes under `folder`: the image tag, so an
    edited environment builds anew and an unchanged one is reused."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(folder).as_posix()
        digest.update(rel.encode() + b"\0")
        if path.is_symlink():
            digest.update(b"link:" + os.readlink(path).encode() + b"\0")
            continue
        digest.update(oct(path.stat().st_mode & 0o777).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _tail(text: str) -> str:
    return text[-OUTPUT_TAIL:].strip()


class ContainerCli:
    """One runtime program (an absolute path to docker or podman)."""

    def __init__(self, program: str) -> None:
        self.program = program

    @property
    def name(self) -> str:
        return Path(self.program).name

    def _run(self, args: list[str], *, timeout_s: float, what: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                [self.program, *args], capture_output=True, text=True, errors="replace", timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            raise ContainerError(f"{self.name} {what}: no answer within {timeout_s:g} s") from exc
        except OSError as exc:
            raise ContainerError(f"{self.name} {what}: {exc}") from exc
        if check and done.returncode != 0:
            raise ContainerError(f"{self.name} {what} failed (exit {done.returncode}): {_tail(done.stderr or done.stdout)}")
        return done

    def image_exists(self, tag: str) -> bool:
        return self._run(["image", "inspect", tag], timeout_s=60, what="image inspect", check=False).returncode == 0

    def pull(self, image: str, *, timeout_s: float) -> str | None:
        """Pull `image` unless it is here already; None when it is here after, else why not."""
        if self.image_exists(image):
            return None
        try:
            done = self._run(["pull", image], timeout_s=timeout_s, what=f"pull of {image}", check=False)
        except ContainerError as exc:
            return str(exc)
        return None if done.returncode == 0 else f"{self.name} pull of {image} failed (exit {done.returncode}): {_tail(done.stderr or done.stdout)}"

    def build(self, context: Path, tag: str, *, timeout_s: float, log: Path | None = None) -> bool:
        """Build `context` (its Dockerfile) as `tag` unless that tag exists; True when it built.
        Concurrent builds of one tag wait for each other instead of building twice."""
        with _BUILD_LOCKS_GUARD:
            lock = _BUILD_LOCKS.setdefault(tag, threading.Lock())
        with lock:
            if self.image_exists(tag):
                return False
            dockerfile = context / "Dockerfile"
            if not dockerfile.is_file():
                raise ContainerError(f"{context}: no Dockerfile to build the task's image from")
            done = self._run(
                ["build", "-t", tag, "-f", str(dockerfile), str(context)], timeout_s=timeout_s, what=f"build of {tag}", check=False
            )
            if log is not None:
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(done.stdout + done.stderr, encoding="utf-8")
            if done.returncode != 0:
                raise ContainerError(f"{self.name} build of {tag} failed (exit {done.returncode}): {_tail(done.stderr or done.stdout)}")
            return True

    def workdir(self, image: str) -> str:
        done = self._run(["image", "inspect", "--format", "{{.Config.WorkingDir}}", image], timeout_s=60, what="image inspect")
        return done.stdout.strip()

    def copy_out_of_image(self, image: str, source: str, dest: Path) -> None:
        """Copy `source` (a folder of the image) into `dest`, through a created, never started container."""
        created = self._run(["create", "--label", LABEL, image, *KEEP_ALIVE], timeout_s=120, what="create").stdout.strip()
        try:
            self._run(["cp", f"{created}:{source.rstrip('/')}/.", str(dest)], timeout_s=600, what=f"cp of {source}")
        finally:
            self.remove(created)

    def start(
        self,
        image: str,
        *,
        name: str,
        mounts: list[tuple[Path, str]],
        network: bool,
        cpus: float | None = None,
        memory_mb: int | None = None,
    ) -> str:
        """Start a detached container kept alive until `remove`; returns its id."""
        args = ["run", "-d", "--name", name, "--label", LABEL, "--init"]
        if not network:
            args += ["--network", "none"]
        if cpus:
            args += ["--cpus", f"{cpus:g}"]
        if memory_mb:
            args += ["--memory", f"{int(memory_mb)}m"]
        for host, inside in mounts:
            args += ["-v", f"{host}:{inside}"]
        return self._run([*args, image, *KEEP_ALIVE], timeout_s=300, what=f"run of {image}").stdout.strip()

    def exec(self, container: str, command: str, *, timeout_s: float, workdir: str = "/") -> ExecResult:
        """Run `command` in the container the way the agent's shell tool does (`ContainerShell`:
        bash where the image has it, stopped inside the container by its `timeout`); the client
        waits a little longer, for an image without `timeout`."""
        argv = ContainerShell(program=self.program, container=container, workdir=workdir).argv(command, timeout_s)
        started = time.monotonic()
        try:
            done = self._run(argv[1:], timeout_s=timeout_s + 10, what="exec", check=False)
        except ContainerError as exc:
            if "no answer within" in str(exc):
                return ExecResult(exit_code=None, output="", timed_out=True)
            raise
        if ran_out(done.returncode, time.monotonic() - started, timeout_s):
            return ExecResult(exit_code=None, output=done.stdout + done.stderr, timed_out=True)
        return ExecResult(exit_code=done.returncode, output=done.stdout + done.stderr, timed_out=False)

    def copy_in(self, container: str, source: Path, dest: str) -> None:
        """Copy folder `source`'s contents into folder `dest` of the container (created if missing)."""
        self.exec(container, f"mkdir -p '{dest}'", timeout_s=60)
        self._run(["cp", f"{source}/.", f"{container}:{dest}"], timeout_s=600, what=f"cp into {dest}")

    def copy_out(self, container: str, source: str, dest: Path) -> bool:
        """Copy folder `source` of the container into `dest`; False when it does not exist."""
        dest.mkdir(parents=True, exist_ok=True)
        done = self._run(["cp", f"{container}:{source.rstrip('/')}/.", str(dest)], timeout_s=600, what="cp", check=False)
        return done.returncode == 0

    def remove(self, container: str) -> None:
        """Stop and remove the container; a removal that fails is not worth failing a task over."""
        self._run(["rm", "-f", container], timeout_s=120, what="rm", check=False)
