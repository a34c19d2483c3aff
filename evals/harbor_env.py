"""A Terminal-Bench / Harbor task's container: built from its environment/, worked in, verified.

Harbor's own order, on a docker or podman CLI (`container_cli`):

1. **Image**: the prebuilt `docker_image` task.toml names, when it is here or can be pulled (as
   Harbor uses it); else `environment/Dockerfile` is built as `hitrate-harbor/<task>:<digest of
   environment/>`, once per content (later tries and tasks reuse it), and the verdict's output
   says why the prebuilt image was not used.
2. **Start** a container of it. The image's working directory (Terminal-Bench's /app) is copied
   out into the attempt's workspace folder, which is then bind-mounted back at that directory:
   the file tools edit the host folder, the shell runs in the container, and both see one tree.
   No network unless task.toml's `allow_internet`; the task's cpus and memory limits apply.
3. **Verify**: `tests/` is copied to /tests (a fresh copy, whatever the agent left there), the
   old /logs/verifier is cleared (a reward file the agent wrote does not count), `/tests/test.sh`
   runs with the verifier's time limit, and /logs/verifier/reward.txt (a number) or reward.json
   (an object of named numbers) is read, as Harbor's verifier reads them. The task passes when
   every reward is at least 1 (Terminal-Bench's tasks write 1 or 0).

The oracle (`run_oracle`, for `hitrate suite check`) copies `solution/` to /solution and runs
`solve.sh`, as Harbor's oracle agent does.
"""

from __future__ import annotations

import json
import math
import secrets
import shutil
import time
from pathlib import Path

from hitrate.evals.container_cli import ContainerCli, ContainerError, ExecResult, content_hash
from hitrate.evals.grading import OUTPUT_TAIL_CHARS, GradeResult
from hitrate.evals.junit import TestOutcome
from hitrate.evals.task import Task
from hitrate.evals.task_graders import HARBOR_REWARD_KEY, HarborGrader
from hitrate.tools.container_shell import ContainerShell


class HarborEnvironment:
    """One started container of a Harbor task (a context manager: the container is removed on exit)."""

    def __init__(self, task: Task, cli: ContainerCli, log_dir: Path) -> None:
        grader = task.spec.grader
        if not isinstance(grader, HarborGrader):
            raise TypeError(f"task {task.id} is not a Harbor task")
        self.task = task
        self.grader = grader
        self.cli = cli
        self.log_dir = log_dir
        self.container: str | None = None
        self.workdir = ""
        self.image_note = ""
        """Which image the container runs (the prebuilt one, or why the Dockerfile was built)."""

    @property
    def environment_dir(self) -> Path:
        return self.task.root / "environment"

    def image(self) -> str:
        """The task's prebuilt image when task.toml names one and it is here or can be pulled (as
        Harbor does), else environment/Dockerfile built; `image_note` says which and why."""
        prebuilt = self.grader.docker_image
        if prebuilt:
            why_not = self.cli.pull(prebuilt, timeout_s=self.grader.build_timeout_s)
            if why_not is None:
                self.image_note = f"[prebuilt image {prebuilt}]\n"
                return prebuilt
            if not (self.environment_dir / "Dockerfile").is_file():
                raise ContainerError(f"the task's image {prebuilt} cannot be had ({why_not}) and it has no environment/Dockerfile")
            self.image_note = f"[image {prebuilt} not used ({why_not}); built environment/Dockerfile instead]\n"
        tag = f"hitrate-harbor/{self.task.id}:{content_hash(self.environment_dir)}"
        self.cli.build(self.environment_dir, tag, timeout_s=self.grader.build_timeout_s, log=self.log_dir / "build.log")
        return tag

    def start(self, workspace: Path) -> ContainerShell:
        """Start the container with `workspace` mounted at the image's working directory; files
        already in `workspace` are laid over the image's."""
        image = self.image()
        self.workdir = self.cli.workdir(image)
        if self.workdir in ("", "/"):
            raise ContainerError(
                f"the image of task {self.task.id} sets no WORKDIR: Harbor tasks work in it (Terminal-Bench's is /app)"
            )
        overlay = None
        if any(workspace.iterdir()):
            overlay = workspace.with_name(workspace.name + "-overlay")
            shutil.copytree(workspace, overlay, symlinks=True)
        self.cli.copy_out_of_image(image, self.workdir, workspace)
        if overlay is not None:
            shutil.copytree(overlay, workspace, symlinks=True, dirs_exist_ok=True)
            shutil.rmtree(overlay, ignore_errors=True)
        self.container = self.cli.start(
            image,
            name=f"hitrate-{self.task.id}-{secrets.token_hex(4)}",
            mounts=[(workspace.resolve(), self.workdir)],
            network=self.grader.allow_internet,
            cpus=self.grader.cpus,
            memory_mb=self.grader.memory_mb,
        )
        return ContainerShell(program=self.cli.program, container=self.container, workdir=self.workdir)

    def _exec(self, command: str, timeout_s: float) -> ExecResult:
        assert self.container is not None, "start() first"
        return self.cli.exec(self.container, command, timeout_s=timeout_s, workdir=self.workdir)

    def run_oracle(self) -> ExecResult:
        """Harbor's oracle agent: solution/solve.sh, run in the container."""
        assert self.container is not None, "start() first"
        self.cli.copy_in(self.container, self.task.solution_dir, "/solution")
        return self._exec("bash /solution/solve.sh", self.grader.agent_timeout_s)

    def verify(self) -> GradeResult:
        """Run tests/test.sh in the container and read its reward (see the module docstring)."""
        assert self.container is not None, "start() first"
        started = time.monotonic()
        try:
            self._exec("rm -rf /tests /logs/verifier && mkdir -p /logs/verifier /logs/agent", 60)
            self.cli.copy_in(self.container, self.task.tests_dir, "/tests")
            run = self._exec(
                "chmod +x /tests/test.sh; /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1; code=$?; "
                "cat /logs/verifier/test-stdout.txt; exit $code",
                self.grader.verifier_timeout_s,
            )
            verifier_dir = self.log_dir / "verifier"
            if verifier_dir.exists():
                shutil.rmtree(verifier_dir)
            self.cli.copy_out(self.container, "/logs/verifier", verifier_dir)
        except ContainerError as exc:
            return self._result(None, None, "", f"verifier: {exc}", started)
        if run.timed_out:
            return self._result(None, None, run.output, None, started, timed_out=True)
        rewards, problem = read_rewards(verifier_dir)
        output = run.output + (f"\n[{problem}]" if problem else f"\n[rewards: {json.dumps(rewards)}]")
        return self._result(rewards, run.exit_code, output, None, started)

    def _result(
        self,
        rewards: dict[str, float] | None,
        exit_code: int | None,
        output: str,
        infra_error: str | None,
        started: float,
        *,
        timed_out: bool = False,
    ) -> GradeResult:
        resolved = bool(rewards) and all(v >= 1.0 for v in rewards.values())
        outcome = TestOutcome.passed if resolved else (TestOutcome.missing if rewards is None else TestOutcome.failed)
        label = f"{self.image_note}[verified by tests/test.sh in {self.cli.name} container {(self.container or '')[:12]}]\n"
        return GradeResult.one_verdict(
            self.task.id, HARBOR_REWARD_KEY, outcome, exit_code=exit_code, timed_out=timed_out, infra_error=infra_error,
            duration_s=time.monotonic() - started, output=(label + output)[-OUTPUT_TAIL_CHARS:], confined=True,
        )

    def close(self) -> None:
        if self.container is not None:
            self.cli.remove(self.container)
            self.container = None

    def __enter__(self) -> "HarborEnvironment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_rewards(verifier_dir: Path) -> tuple[dict[str, float] | None, str | None]:
    """The rewards the verifier wrote, as Harbor reads them: reward.txt first (one number), else
    reward.json (an object of numbers); (None, why) when neither holds a reward."""
    text_path, json_path = verifier_dir / "reward.txt", verifier_dir / "reward.json"
    if text_path.is_file():
        raw = text_path.read_text(encoding="utf-8", errors="replace").strip()
        if not raw:
            return None, "reward.txt is empty"
        try:
            value = float(raw)
        except ValueError:
            return None, f"reward.txt is not a number: {raw[:80]!r}"
        return ({HARBOR_REWARD_KEY: value}, None) if math.isfinite(value) else (None, f"reward.txt is not finite: {raw[:80]!r}")
    if json_path.is_file():
        try:
            data = json.loads(json_path.read_text(encoding="utf-8", errors="replace"))
        except ValueError as exc:
            return None, f"reward.json is not JSON: {exc}"
        if not isinstance(data, dict) or not data:
            return None, "reward.json is not an object of named rewards"
        rewards = {}
        for name, value in data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return None, f"reward.json: {name!r} is not a number"
            rewards[str(name)] = float(value)
        return rewards, None
    return None, "the verifier wrote no /logs/verifier/reward.txt or reward.json"
