"""Whether a benchmark task can run on this machine: its toolchain on PATH, a container runtime.

A task that cannot run is not an error and not a failure: the suite lists it as unavailable with
the reason (Aider's polyglot tracks need their compilers; SWE-bench's official images and Harbor's
task environments need a container runtime), and runs go on without it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from hitrate.evals import build_caches, crates
from hitrate.evals.container_cli import ContainerCli, ContainerError
from hitrate.evals.task_graders import CommandGrader, Grader, HarborGrader, SwebenchGrader

CONTAINER_RUNTIMES = ("docker", "podman")


@functools.cache
def container_runtime() -> tuple[str | None, str]:
    """(program, "") for the first runtime whose daemon answers, else (None, why not).
    `HITRATE_CONTAINER_RUNTIME` (docker, podman or a path) picks one instead of the first found.

    A `docker` client without a reachable daemon is not a runtime, so the probe asks the daemon."""
    reasons = []
    chosen = os.environ.get("HITRATE_CONTAINER_RUNTIME", "").strip()
    for name in (chosen,) if chosen else CONTAINER_RUNTIMES:
        program = shutil.which(name)
        if program is None:
            continue
        try:
            probe = subprocess.run(
                # `version` asks the daemon (docker) or the engine (podman) with one format both take.
                [program, "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True, timeout=15
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{name}: {exc}")
            continue
        if probe.returncode == 0:
            return program, ""
        last = (probe.stderr or probe.stdout).strip().splitlines()
        reasons.append(f"{name}: {last[-1] if last else f'exit {probe.returncode}'}")
    if not reasons:
        return None, f"{chosen} (HITRATE_CONTAINER_RUNTIME) is not on PATH" if chosen else "neither docker nor podman is on PATH"
    return None, "; ".join(reasons)


def official_harness() -> bool:
    """Whether the official SWE-bench harness (the `swebench` extra, with its docker client) imports."""
    try:
        import docker  # noqa: F401
        import swebench.harness.run_evaluation  # noqa: F401
    except ImportError:
        return False
    return True


def in_official_image(grader: SwebenchGrader) -> bool:
    """SWE-bench grades in the instance's official image when it names one (with its eval script),
    a container runtime answers and the official harness is installed; else in the local sandbox."""
    return bool(grader.image and grader.eval_script) and container_runtime()[0] is not None and official_harness()


def missing_headers(headers: list[str]) -> list[str]:
    """Those of the headers in none of the compiler's usual include folders (and $CPATH's)."""
    folders = [Path(p) for p in os.environ.get("CPATH", "").split(os.pathsep) + os.environ.get("CPLUS_INCLUDE_PATH", "").split(os.pathsep) if p]
    folders += [Path("/usr/include"), Path("/usr/local/include"), Path("/opt/homebrew/include")]
    return [h for h in headers if not any((folder / h).is_file() for folder in folders)]


def unmet(grader: Grader | None) -> str | None:
    """Why a task with this grader cannot run here; None when it can."""
    if grader is None:
        return None
    if isinstance(grader, CommandGrader):
        missing = [p for p in grader.requires if shutil.which(p) is None]
        if missing:
            return f"the {grader.language} toolchain is not on PATH (missing: {', '.join(missing)})"
        for name in grader.linked_packages.values():
            if build_caches.prepared(name) is None:
                return (f"the {grader.language} track's test packages are not installed here "
                        f"({', '.join(build_caches.NPM_PACKAGES[name])}): run `hitrate suite prepare {name}` once")  # fmt: skip
        if absent := [f for f in grader.files if not Path(f).is_file()]:
            return f"its test runner needs files not installed here: {', '.join(absent)}"
        if headers := missing_headers(grader.headers):
            return f"its build needs headers not installed here: {', '.join(headers)}"
        missing = crates.unavailable(grader.crates)
        return f"its Cargo.toml needs crates not available offline here: {', '.join(missing)}" if missing else None
    if isinstance(grader, SwebenchGrader):
        if grader.local_blocker is None or in_official_image(grader):
            return None
        if not (grader.image and grader.eval_script):
            return f"{grader.local_blocker}; the instance names no official image and eval script to grade it in"
        runtime, why = container_runtime()
        if runtime is None:
            return f"{grader.local_blocker}, and no container runtime is reachable for its official image ({why})"
        return f"{grader.local_blocker}; grading in its official image needs the swebench extra (pip install 'hitrate[swebench]')"
    if isinstance(grader, HarborGrader):
        runtime, why = container_runtime()
        if runtime is None:
            return f"a Terminal-Bench task runs in its environment/ container; no container runtime is reachable ({why})"
        return None
    raise TypeError(f"unknown grader {grader!r}")


def oracle_unmet(grader: Grader | None) -> str | None:
    """Why the task's reference solution cannot run here although the task can (the oracle then
    cannot prove it); None when it can."""
    if isinstance(grader, CommandGrader) and (missing := crates.unavailable({**grader.crates, **grader.oracle_crates})):
        return f"the reference solution needs crates not available offline here: {', '.join(missing)}"
    return None


def container_cli() -> ContainerCli:
    """The reachable runtime's CLI; ContainerError (with why) when there is none."""
    program, why = container_runtime()
    if program is None:
        raise ContainerError(f"no container runtime is reachable ({why})")
    return ContainerCli(program)
