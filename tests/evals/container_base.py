"""A real container runtime for the tests, with a base image made on this machine (no registry).

Terminal-Bench task Dockerfiles start `FROM python:3.12-slim`; no registry is reachable here, so
the tests build a small root filesystem from this machine's own programs (busybox's applets,
bash, python3 with its standard library and the shared libraries they load), import it into a
podman store of their own and tag it with the name the fixtures' Dockerfiles ask for. Then
`podman build` of a task's environment, the agent's shell in its container and its verifier are
all the real thing.

Nothing here touches the user's podman store: `CONTAINERS_STORAGE_CONF` points at a store under
the test's temporary folder.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

BASE_TAGS = ("docker.io/library/python:3.12-slim",)
_PYTHON = "/usr/bin/python3"
_SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "__pycache__"}


def _libraries(binary: str) -> list[str]:
    done = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
    found = []
    for line in done.stdout.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            found.append(path)
    return found


def _copy_into(root: Path, path: str) -> None:
    real = os.path.realpath(path)
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copy2(real, target)


def build_rootfs(root: Path, *, programs: tuple[str, ...] = (), python_packages: tuple[str, ...] = ()) -> None:
    """busybox (sh and the core utilities), bash and python3 in `root`, plus host `programs`
    (e.g. git) and pure-Python packages of this interpreter (e.g. pytest) for python3."""
    busybox = shutil.which("busybox")
    if busybox is None:
        raise RuntimeError("busybox is not installed")
    (root / "bin").mkdir(parents=True)
    shutil.copy2(busybox, root / "bin" / "busybox")
    subprocess.run([str(root / "bin" / "busybox"), "--install", "-s", str(root / "bin")], check=True)
    for link in (root / "bin").iterdir():  # --install writes absolute links to the host's busybox
        if link.is_symlink():
            link.unlink()
            link.symlink_to("busybox")
    bash = shutil.which("bash") or "/bin/bash"
    (root / "bin" / "bash").unlink(missing_ok=True)
    shutil.copy2(bash, root / "bin" / "bash")
    python = os.path.realpath(_PYTHON)
    (root / "usr" / "bin").mkdir(parents=True)
    shutil.copy2(python, root / "usr" / "bin" / "python3")
    binaries = [bash, python]
    for name in programs:
        found = shutil.which(name)
        if found is None:
            raise RuntimeError(f"{name} is not installed")
        (root / "usr" / "bin" / name).unlink(missing_ok=True)
        (root / "bin" / name).unlink(missing_ok=True)  # a busybox applet of that name
        shutil.copy2(os.path.realpath(found), root / "usr" / "bin" / name)
        binaries.append(found)
    for lib in {lib for binary in binaries for lib in _libraries(binary)}:
        _copy_into(root, lib)
    packages = root / "usr" / "lib" / "python3" / "dist-packages"
    for name in python_packages:
        module = __import__(name)
        source = Path(module.__file__)
        source = source.parent if source.name == "__init__.py" else source
        packages.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, packages / source.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, packages / source.name)
        for dist_name in importlib.metadata.packages_distributions().get(name, []):
            # The metadata too: pytest and pluggy read their own versions from it.
            info = Path(str(importlib.metadata.distribution(dist_name)._path))  # type: ignore[attr-defined]
            if not (packages / info.name).exists():
                shutil.copytree(info, packages / info.name)
    if "pytest" in python_packages:
        launcher = root / "usr" / "bin" / "pytest"
        launcher.write_text("#!/usr/bin/python3\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
        launcher.chmod(0o755)
    stdlib = Path(python).parent.parent / "lib" / Path(python).name
    shutil.copytree(
        stdlib, root / "usr" / "lib" / stdlib.name, symlinks=True,
        ignore=lambda d, names: [n for n in names if n in _SKIP_STDLIB or n.startswith("config-") or n == "dist-packages"],
    )  # fmt: skip
    for folder in ("tmp", "etc", "root", "app"):
        (root / folder).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")


def store_env(folder: Path) -> dict[str, str]:
    """Environment variables that give podman a store of its own under `folder`."""
    conf = folder / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{folder / "graph"}"\nrunroot = "{folder / "run"}"\n')
    return {"CONTAINERS_STORAGE_CONF": str(conf)}


def podman_problem() -> str | None:
    """Why podman cannot run containers here (None: it can)."""
    podman = shutil.which("podman")
    if podman is None:
        return "podman is not installed (.ci/container-runtime.sh installs and configures it)"
    if shutil.which("busybox") is None or not Path(_PYTHON).exists():
        return "busybox or /usr/bin/python3 is missing to build the test base image"
    return None


def prepare_base_image(
    folder: Path, env: dict[str, str], tags: tuple[str, ...] = BASE_TAGS, **extras: tuple[str, ...]
) -> str | None:
    """Import a base image (build_rootfs with `extras`) under every tag in `tags`; the reason
    when podman cannot run it."""
    rootfs, tarball = folder / "rootfs", folder / "rootfs.tar"
    build_rootfs(rootfs, **extras)
    with tarfile.open(tarball, "w") as tar:
        tar.add(rootfs, arcname=".")
    full_env = {**os.environ, **env}
    imported = subprocess.run(["podman", "import", str(tarball), tags[0]], capture_output=True, text=True, env=full_env)
    if imported.returncode != 0:
        return f"podman import failed: {imported.stderr.strip()[-500:]}"
    for tag in tags[1:]:
        subprocess.run(["podman", "tag", tags[0], tag], check=True, env=full_env)
    probe = subprocess.run(
        ["podman", "run", "--rm", "--network", "none", tags[0], "python3", "-c", "print('ok')"],
        capture_output=True, text=True, env=full_env,
    )  # fmt: skip
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        return f"podman cannot run a container here: {(probe.stderr or probe.stdout).strip()[-500:]}"
    return None


def start_docker_api(folder: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """podman's Docker-compatible API on a unix socket under `folder` (what docker-py, and so the
    official SWE-bench harness, talks to); returns the service and its DOCKER_HOST."""
    import time

    socket = folder / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not socket.exists() and time.monotonic() < deadline and service.poll() is None:
        time.sleep(0.1)
    if not socket.exists():
        service.kill()
        raise RuntimeError("podman system service did not open its socket")
    return service, f"unix://{socket}"


def remove_store(folder: Path, env: dict[str, str]) -> None:
    """Remove the store's containers and images and its overlay mount, so the folder can go."""
    full_env = {**os.environ, **env}
    # The store named outright, never through the environment: a reset of the user's own store
    # would delete their images.
    store = ["--root", str(folder / "graph"), "--runroot", str(folder / "run")]
    subprocess.run(["podman", *store, "system", "reset", "--force"], capture_output=True, env=full_env, timeout=300)
    overlay = folder / "graph" / "overlay"
    if overlay.exists():
        subprocess.run(["umount", "-l", str(overlay)], capture_output=True)


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """`env` set in this process for the block (the runtime probe re-asked on entry and exit)."""
    from hitrate.evals import requirements

    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        requirements.container_runtime.cache_clear()
        try:
            yield
        finally:
            patch.undo()
            requirements.container_runtime.cache_clear()
