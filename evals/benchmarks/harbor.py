"""Terminal-Bench / Harbor task folders as hitrate tasks.

A task folder holds `task.toml` (`[metadata]`, `[verifier] timeout_sec`, `[agent] timeout_sec`,
`[environment]` resources and the prebuilt `docker_image`; both schemas of the public tasks: the
first's `version = "1.0"`, the later one's `[task]` table with name and keywords),
`instruction.md`, `environment/` (its Dockerfile), `tests/`
(`test.sh`, which writes /logs/verifier/reward.txt or reward.json) and `solution/` (`solve.sh`,
the oracle). Accepted layouts: one task folder, a folder of them, or a dataset with `tasks/`.

Harbor runs the agent and the verifier inside the task's container, and so does hitrate
(`harbor_env`): these tasks need a container runtime (docker or podman); without one they are
listed as unavailable with the reason (`requirements`).
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

from hitrate.evals.benchmarks.materialise import BenchmarkError, write_task_toml

DIFFICULTIES = {"easy", "medium", "hard"}


def find_tasks(source: Path) -> list[Path]:
    def is_task(folder: Path) -> bool:
        return (folder / "task.toml").is_file() and (folder / "instruction.md").is_file()

    if is_task(source):
        return [source]
    found = [p for p in sorted(source.iterdir()) if p.is_dir() and is_task(p)]
    if not found and (source / "tasks").is_dir():
        found = [p for p in sorted((source / "tasks").iterdir()) if p.is_dir() and is_task(p)]
    if not found:
        raise BenchmarkError(f"{source}: no Harbor task folder (task.toml + instruction.md) found")
    return found


def _task_id(folder: Path) -> str:
    return re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-")


def convert_task(folder: Path, out: Path, source: Path) -> str | None:
    try:
        config: dict[str, Any] = tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return f"task.toml is not valid TOML: {exc}"
    for part in ("environment", "tests"):
        if not (folder / part).is_dir():
            return f"no {part}/ folder"
    environment = config.get("environment") or {}
    compose = [n for n in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml") if (folder / "environment" / n).is_file()]
    if compose:
        return f"its environment is a docker-compose project (environment/{compose[0]}, several services): unsupported here, only one image runs"
    if not (folder / "environment" / "Dockerfile").is_file() and not environment.get("docker_image"):
        return "no environment/Dockerfile and no docker_image in task.toml"
    if not (folder / "tests" / "test.sh").is_file():
        return "no tests/test.sh"
    if not (folder / "solution" / "solve.sh").is_file():
        return "no solution/solve.sh (the oracle a suite check runs)"
    metadata = config.get("metadata") or {}
    task_meta = config.get("task") or {}
    agent, verifier = (config.get(k) or {} for k in ("agent", "verifier"))
    agent_timeout = float(agent.get("timeout_sec", 600.0))
    difficulty = str(metadata.get("difficulty", "medium")).lower()
    tags = [str(t) for t in (metadata.get("tags") or task_meta.get("keywords") or [])]
    task_dir = out / _task_id(folder)
    for part in ("environment", "tests", "solution"):
        shutil.copytree(folder / part, task_dir / part)
    (task_dir / "workspace").mkdir()
    shutil.copyfile(folder / "instruction.md", task_dir / "instruction.md")
    write_task_toml(task_dir, {
        "id": task_dir.name,
        "title": str(task_meta.get("name") or f"Terminal-Bench {folder.name}"),
        "tags": ["terminal-bench", *tags],
        "difficulty": difficulty if difficulty in DIFFICULTIES else "medium",
        "limits": {"max_steps": 100, "max_cost_usd": 5.0, "max_wall_s": agent_timeout},
        "grader": {
            "kind": "harbor",
            "verifier_timeout_s": float(verifier.get("timeout_sec", 600.0)),
            "agent_timeout_s": agent_timeout,
            "allow_internet": bool(environment.get("allow_internet", False)),
            "build_timeout_s": float(environment.get("build_timeout_sec", 600.0)),
            **({"docker_image": str(environment["docker_image"])} if environment.get("docker_image") else {}),
            **_resources(environment),
        },
        "source": {"benchmark": "terminal-bench", "instance": folder.name, "paths": [str(source)]},
    })  # fmt: skip
    return None


def _resources(environment: dict[str, Any]) -> dict[str, Any]:
    """cpus and memory as task.toml gives them: `memory_mb` (Terminal-Bench 2) or `memory` ("4G")."""
    found: dict[str, Any] = {}
    if environment.get("cpus"):
        found["cpus"] = float(environment["cpus"])
    memory = environment.get("memory_mb") or environment.get("memory")
    if isinstance(memory, (int, float)) and memory > 0:
        found["memory_mb"] = int(memory)
    elif isinstance(memory, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)i?[bB]?\s*", memory)
        if match:
            scale = {"k": 1 / 1024, "m": 1, "g": 1024, "": 1 / (1024 * 1024)}[match.group(2).lower()]
            found["memory_mb"] = max(1, int(float(match.group(1)) * scale))
    return found


def convert(source: Path, out: Path, repos: Path | None) -> dict[str, str]:
    if repos is not None:
        raise BenchmarkError("--repos is for swebench:FILE.jsonl suites")
    unavailable: dict[str, str] = {}
    for folder in find_tasks(source):
        reason = convert_task(folder, out, source)
        if reason is not None:
            unavailable[_task_id(folder)] = reason
    return unavailable
