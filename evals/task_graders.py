"""How a task from a published benchmark is graded, when it is not hitrate's own pytest format.

A task.toml may carry a `[grader]` table instead of `[tests]`; its `kind` picks the rules:

- ``command``: a test command whose exit status is the verdict (Aider's polyglot benchmark runs
  each Exercism exercise's test command and counts exit 0 as a pass). The hidden test files live
  under the task's `tests/` at the paths they take in the exercise and are copied there before
  the command runs.
- ``swebench``: SWE-bench's rules: the instance's `test_patch` is applied, its test files run,
  the log is parsed by the official harness's log parser and graded by its F2P / P2P report.
- ``harbor``: a Terminal-Bench / Harbor task folder, verified by its `tests/test.sh` inside the
  task's environment container (it writes the reward file).

Each grader names what it needs (programs on PATH, a container runtime); a task whose needs are
not met is listed by the loader as unavailable, with the reason, instead of run.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CommandGrader(BaseModel):
    """Pass when `command` exits 0 in the workspace with the hidden tests in place."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["command"] = "command"
    language: str
    """The exercise's track (rust, go, cpp, ...), for reports."""
    command: Annotated[list[str], Field(min_length=1)]
    """argv, run in the grading folder."""
    requires: list[str] = []
    """Programs that must be on PATH for the command to run."""
    test_files: Annotated[list[str], Field(min_length=1)]
    """Hidden test files, relative to the workspace; each is stored at tests/<path> in the task."""
    test_id: str = "tests"
    """The name the single verdict is reported under."""
    timeout_s: Annotated[float, Field(gt=0)] = 180.0
    """Aider's benchmark gives each test run 180 s."""
    env: dict[str, str] = {}
    """Extra environment for the command (relative values are resolved in the grading folder)."""
    grading_folder: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")] = "work"
    """The name of the folder the command runs in: Exercism's C++ CMakeLists.txt names the build
    and its source files after it, so an exercise is graded in a folder named after itself."""
    crates: dict[str, str] = {}
    """Rust crates the exercise's own Cargo.toml needs (name -> version requirement): without them
    offline (`evals.crates`), it cannot run here."""
    oracle_crates: dict[str, str] = {}
    """Rust crates only the reference solution needs (`.meta/Cargo-example.toml`): without them
    offline the task still runs, but the oracle cannot prove it here."""

    address_space_limit: bool = True
    """Whether the sandbox caps each process's address space (RLIMIT_AS). Off for node: V8
    reserves gigabytes of address space per worker thread without using them (the whole run's
    memory limit, a cgroup where available, still holds)."""
    files: list[str] = []
    """Absolute paths the command needs that no program on PATH brings (Debian's JUnit and
    AssertJ jars for Java): without them it cannot run here."""
    headers: list[str] = []
    """C/C++ headers the build needs beyond the compiler's own (a C++ exercise's Boost components,
    e.g. boost/date_time.hpp): without them in the include folders it cannot run here."""
    linked_packages: dict[str, str] = {}
    """Grading-folder path -> packages prepared once (`build_caches.NPM_PACKAGES`, by `hitrate
    suite prepare`), linked there read-only (Exercism JavaScript's node_modules)."""
    seeded_caches: dict[str, str] = {}
    """Environment variable -> shared build cache (`build_caches.WARMERS`): the folder the variable
    names is filled from hitrate's own warmed cache before the command runs (Go's GOCACHE)."""

    @property
    def title(self) -> str:
        """What produces the command's output, for headings: the first program it requires
        (cargo, go, cmake), else the command's own first word."""
        return self.requires[0] if self.requires else self.command[0]


class SwebenchGrader(BaseModel):
    """SWE-bench's acceptance: every FAIL_TO_PASS test passes, every PASS_TO_PASS one is kept."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["swebench"] = "swebench"
    instance_id: str
    repo: str
    version: str = ""
    log_parser: str = "parse_log_pytest"
    """A key of `swebench.harness.log_parsers.PARSER_REGISTRY`."""
    eval_type: str = "pass_and_fail"
    test_files: list[str]
    """The test files the test patch touches (SWE-bench's test directives)."""
    test_command: Annotated[list[str], Field(min_length=1)]
    """argv after the interpreter, e.g. ["-m", "pytest", "-rA", ...]."""
    fail_to_pass: Annotated[list[str], Field(min_length=1)]
    pass_to_pass: list[str] = []
    timeout_s: Annotated[float, Field(gt=0)] = 1800.0
    """The official harness's default per-instance timeout."""
    image: str | None = None
    """The instance's official image, when the JSONL names one."""
    eval_script: str | None = None
    """The instance's official eval script (SWE-bench 5 datasets carry one with the image): with a
    container runtime and the `swebench` extra, the official harness grades in that image."""
    local_blocker: str | None = None
    """Why the instance cannot be graded in the local sandbox (None: it can)."""


# The one verdict of a Harbor task, under this test id.
HARBOR_REWARD_KEY = "reward"


class HarborGrader(BaseModel):
    """A Harbor task: `tests/test.sh` writes /logs/verifier/reward.txt (or reward.json)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["harbor"] = "harbor"
    verifier_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    agent_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    allow_internet: bool = False
    build_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    docker_image: str | None = None
    """The prebuilt image task.toml names (`[environment] docker_image`), used as Harbor uses it:
    when present locally or pulled; else environment/Dockerfile is built, and the reason said."""
    cpus: Annotated[float, Field(gt=0)] | None = None
    memory_mb: Annotated[int, Field(gt=0)] | None = None


Grader = Annotated[Union[CommandGrader, SwebenchGrader, HarborGrader], Field(discriminator="kind")]


class TaskSource(BaseModel):
    """Where a task converted from a published benchmark came from."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    """aider-polyglot, swebench, terminal-bench."""
    instance: str
    """The benchmark's own id (exercise path, instance_id, task folder name)."""
    paths: Annotated[list[str], Field(min_length=1)]
    """The originals on disk (the benchmark checkout or JSONL file, the repository clone): hidden
    from the agent like the task's own tests and solution, since they hold the answers."""
    licence: str = ""

    @model_validator(mode="after")
    def _absolute(self) -> "TaskSource":
        relative = [p for p in self.paths if not p.startswith("/")]
        if relative:
            raise ValueError(f"source paths must be absolute, got {relative}")
        return self
