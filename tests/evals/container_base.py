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

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

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


def build_rootfs(root: Path) -> None:
    """busybox (sh and the core utilities), bash and python3 in `root`."""
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
    for lib in {*_libraries(bash), *_libraries(python)}:
        _copy_into(root, lib)
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


def prepare_base_image(folder: Path, env: dict[str, str]) -> str | None:
    """Import the base image under every tag in BASE_TAGS; the reason when podman cannot run it."""
    rootfs, tarball = folder / "rootfs", folder / "rootfs.tar"
    build_rootfs(rootfs)
    with tarfile.open(tarball, "w") as tar:
        tar.add(rootfs, arcname=".")
    full_env = {**os.environ, **env}
    imported = subprocess.run(["podman", "import", str(tarball), BASE_TAGS[0]], capture_output=True, text=True, env=full_env)
    if imported.returncode != 0:
        return f"podman import failed: {imported.stderr.strip()[-500:]}"
    for tag in BASE_TAGS[1:]:
        subprocess.run(["podman", "tag", BASE_TAGS[0], tag], check=True, env=full_env)
    probe = subprocess.run(
        ["podman", "run", "--rm", "--network", "none", BASE_TAGS[0], "python3", "-c", "print('ok')"],
        capture_output=True, text=True, env=full_env,
    )  # fmt: skip
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        return f"podman cannot run a container here: {(probe.stderr or probe.stdout).strip()[-500:]}"
    return None
