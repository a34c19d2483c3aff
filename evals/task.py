"""Eval tasks and suites: the on-disk format, its pydantic model, and the loader.

A suite is a folder with one sub-folder per task::

    <suite>/<task-id>/
        task.toml        metadata, limits, test command, F2P / P2P test ids
        instruction.md   exactly what the agent is told
        workspace/       starting files (the agent's working directory is a copy of it)
        tests/           hidden acceptance tests, copied in only after the agent stops
        solution/        reference files overlaid on workspace/; never shown to the agent

Test ids are pytest node ids relative to the task root, e.g. ``tests/test_lru.py::test_evicts``.

A task converted from a published benchmark (`evals.benchmarks`) has a `[grader]` table instead of
`[tests]`: that benchmark's own grading rules (`task_graders`), and a `[source]` table naming the
original, which the agent never sees either.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hitrate.evals.requirements import unmet
from hitrate.evals.task_graders import HARBOR_REWARD_KEY, CommandGrader, Grader, HarborGrader, SwebenchGrader, TaskSource

TASK_ID_PATTERN = r"^[a-z0-9][a-z0-9-]*[a-z0-9]$"
BUNDLED_SUITES_DIR = Path(__file__).resolve().parent / "suites"
DEFAULT_SUITE_NAME = "basic"


class TaskFormatError(ValueError):
    """A task folder that does not follow the format; the message names the folder and the fault."""

    def __init__(self, task_dir: Path, problem: str) -> None:
        self.task_dir = task_dir
        self.problem = problem
        super().__init__(f"{task_dir}: {problem}")


class SuiteFormatError(ValueError):
    """A suite with one or more malformed tasks; every fault is listed, not just the first."""

    def __init__(self, suite_dir: Path, errors: list[TaskFormatError] | None = None, problem: str = "") -> None:
        self.suite_dir = suite_dir
        self.errors = errors or []
        if self.errors:
            message = f"suite {suite_dir}: {len(self.errors)} malformed task(s)\n"
            message += "\n".join(f"  - {e}" for e in self.errors)
        else:
            message = f"suite {suite_dir}: {problem}"
        super().__init__(message)


class Difficulty(StrEnum):
    easy = "easy"
    medium = "medium"
    hard = "hard"


class TaskLimits(BaseModel):
    """What the runner enforces on the agent for one task."""

    model_config = ConfigDict(extra="forbid")

    max_steps: Annotated[int, Field(gt=0)]
    """Most model calls the agent may make."""
    max_cost_usd: Annotated[float, Field(gt=0)]
    """Most dollars the agent may spend (priced from the ledger)."""
    max_wall_s: Annotated[float, Field(gt=0)]
    """Most seconds the agent may run, tool time included."""


class TaskTests(BaseModel):
    """How the hidden tests are run and which of them decide the outcome."""

    model_config = ConfigDict(extra="forbid")

    command: str = "pytest tests"
    """Shell-style pytest command line; grading runs it as `<this python> -m pytest <args>`."""
    timeout_s: Annotated[float, Field(gt=0)] = 60.0
    """Wall-clock limit for one run of the tests."""
    fail_to_pass: list[str]
    """Node ids that fail on workspace/ and must pass once the task is done."""
    pass_to_pass: list[str] = []
    """Node ids that already pass on workspace/ and must keep passing."""
    fails_at_start: Literal["every", "any"] = "every"
    """What a sound task shows on workspace/: every fail_to_pass test failing (SWE-bench's rule),
    or the task as a whole failing, any one of them (Aider's polyglot rule, whose stubs may pass a
    test or two already). Either way every test must pass once the task is done."""

    @field_validator("command")
    @classmethod
    def _pytest_command(cls, value: str) -> str:
        # Grading parses pytest's JUnit XML, so only pytest commands can be graded.
        argv = shlex.split(value)
        if not argv or argv[0] != "pytest":
            raise ValueError(f"test command must start with 'pytest', got {value!r}")
        return value

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _node_ids(cls, ids: list[str]) -> list[str]:
        for node_id in ids:
            path = node_id.split("::", 1)[0]
            if "::" not in node_id or not path.endswith(".py") or path.startswith(("/", "..")):
                raise ValueError(f"{node_id!r} is not a pytest node id like 'tests/test_x.py::test_y'")
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate test ids")
        return ids

    @model_validator(mode="after")
    def _disjoint(self) -> TaskTests:
        if not self.fail_to_pass:
            raise ValueError("fail_to_pass is empty: a task needs at least one test that its work must fix")
        both = sorted(set(self.fail_to_pass) & set(self.pass_to_pass))
        if both:
            raise ValueError(f"tests listed as both fail_to_pass and pass_to_pass: {both}")
        return self

    @property
    def argv(self) -> list[str]:
        """The command's arguments after `pytest`."""
        return shlex.split(self.command)[1:]


class TaskSpec(BaseModel):
    """The contents of task.toml."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Field(pattern=TASK_ID_PATTERN)]
    """Stable id; equal to the task's folder name."""
    title: Annotated[str, Field(min_length=1)]
    tags: list[str] = []
    """Free-form labels (bugfix, feature, refactor, parser, ...) for filtering and reports."""
    difficulty: Difficulty
    limits: TaskLimits
    tests: TaskTests | None = None
    """hitrate's own pytest grading; absent when `grader` says how the task is graded."""
    grader: Grader | None = None
    """A published benchmark's grading rules (see `task_graders`)."""
    source: TaskSource | None = None
    """The benchmark instance this task was converted from."""

    @model_validator(mode="after")
    def _one_grading(self) -> TaskSpec:
        if (self.tests is None) == (self.grader is None):
            raise ValueError("a task has exactly one of [tests] (pytest) and [grader]")
        return self


class Task(BaseModel):
    """A loaded task: its spec plus where its parts live on disk."""

    model_config = ConfigDict(frozen=True)

    spec: TaskSpec
    root: Path

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def instruction_path(self) -> Path:
        return self.root / "instruction.md"

    @property
    def workspace_dir(self) -> Path:
        return self.root / "workspace"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    @property
    def instruction(self) -> str:
        return self.instruction_path.read_text(encoding="utf-8")

    @property
    def fail_to_pass(self) -> list[str]:
        """Tests that must go from failing to passing (a command grader's one verdict)."""
        grader = self.spec.grader
        if isinstance(grader, CommandGrader):
            return [grader.test_id]
        if isinstance(grader, SwebenchGrader):
            return list(grader.fail_to_pass)
        if isinstance(grader, HarborGrader):
            return [HARBOR_REWARD_KEY]
        assert self.spec.tests is not None
        return list(self.spec.tests.fail_to_pass)

    @property
    def pass_to_pass(self) -> list[str]:
        grader = self.spec.grader
        if isinstance(grader, SwebenchGrader):
            return list(grader.pass_to_pass)
        if grader is not None:
            return []
        assert self.spec.tests is not None
        return list(self.spec.tests.pass_to_pass)

    @property
    def test_ids(self) -> list[str]:
        return [*self.fail_to_pass, *self.pass_to_pass]

    @property
    def timeout_s(self) -> float:
        """Wall-clock limit of one run of the hidden tests."""
        grader = self.spec.grader
        if isinstance(grader, (CommandGrader, SwebenchGrader)):
            return grader.timeout_s
        if isinstance(grader, HarborGrader):
            return grader.verifier_timeout_s
        assert self.spec.tests is not None
        return self.spec.tests.timeout_s

    @property
    def hidden_paths(self) -> tuple[str, ...]:
        """What the agent and the code under test must not see: the hidden tests, the reference
        solution, and the benchmark original they were converted from."""
        paths = [str(self.tests_dir), str(self.solution_dir)]
        if self.spec.source is not None:
            paths.extend(self.spec.source.paths)
        return tuple(paths)


class Suite(BaseModel):
    """A named, ordered collection of tasks."""

    model_config = ConfigDict(frozen=True)

    name: str
    root: Path
    tasks: list[Task]
    """The tasks that can run here."""
    unavailable: dict[str, str] = {}
    """Tasks that cannot run on this machine (a missing toolchain or container runtime), with why."""

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"suite {self.name!r} has no task {task_id!r}")

    def select(self, task_ids: list[str]) -> list[Task]:
        """Tasks with the given ids, in suite order; an unknown id is a KeyError naming it."""
        known = {t.id for t in self.tasks}
        unknown = [t for t in task_ids if t not in known]
        cannot = [t for t in unknown if t in self.unavailable]
        if cannot:
            raise KeyError("; ".join(f"task {t!r} cannot run here: {self.unavailable[t]}" for t in cannot))
        if unknown:
            raise KeyError(f"suite {self.name!r} has no task(s) {unknown}")
        wanted = set(task_ids)
        return [t for t in self.tasks if t.id in wanted]


def _files_in(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def load_task(task_dir: Path) -> Task:
    """Load and validate one task folder; any fault raises TaskFormatError naming it."""
    task_dir = Path(task_dir)
    toml_path = task_dir / "task.toml"
    if not toml_path.is_file():
        raise TaskFormatError(task_dir, "missing task.toml")
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskFormatError(task_dir, f"task.toml is not valid TOML: {exc}") from exc
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as exc:
        faults = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}" for e in exc.errors())
        raise TaskFormatError(task_dir, f"task.toml: {faults}") from exc
    if spec.id != task_dir.name:
        raise TaskFormatError(task_dir, f"task.toml id {spec.id!r} differs from the folder name {task_dir.name!r}")

    task = Task(spec=spec, root=task_dir)
    instruction = task.instruction_path
    if not instruction.is_file() or not instruction.read_text(encoding="utf-8").strip():
        raise TaskFormatError(task_dir, "missing or empty instruction.md")
    # A Harbor task's starting state is its container image: its workspace/ may be empty.
    required = ("tests", "solution") if isinstance(spec.grader, HarborGrader) else ("workspace", "tests", "solution")
    folders = {"workspace": task.workspace_dir, "tests": task.tests_dir, "solution": task.solution_dir}
    for name in required:
        if not folders[name].is_dir() or not _files_in(folders[name]):
            raise TaskFormatError(task_dir, f"missing or empty {name}/ folder")
    if spec.grader is None:
        _check_pytest_layout(task)
    elif isinstance(spec.grader, CommandGrader):
        for rel in spec.grader.test_files:
            if not (task.tests_dir / rel).is_file():
                raise TaskFormatError(task_dir, f"hidden test file tests/{rel} does not exist")
    elif isinstance(spec.grader, SwebenchGrader) and not (task.tests_dir / "test.patch").is_file():
        raise TaskFormatError(task_dir, "a SWE-bench task keeps its test patch in tests/test.patch")
    return task


def _check_pytest_layout(task: Task) -> None:
    task_dir = task.root
    if (task.workspace_dir / "tests").exists():
        raise TaskFormatError(task_dir, "workspace/tests would be replaced by the hidden tests; rename it")
    for node_id in task.test_ids:
        rel = node_id.split("::", 1)[0]
        if not rel.startswith("tests/"):
            raise TaskFormatError(task_dir, f"test id {node_id!r} does not point into tests/")
        if not (task_dir / rel).is_file():
            raise TaskFormatError(task_dir, f"test id {node_id!r} names a file that does not exist")


def load_suite(path: Path) -> Suite:
    """Load every task folder under `path` (sub-folders starting with '.' or '_' are skipped).

    Raises SuiteFormatError listing every malformed task, or if `path` holds no task at all (a
    converted benchmark whose instances all failed to convert lists them as unavailable instead).
    """
    path = Path(path)
    if not path.is_dir():
        raise SuiteFormatError(path, problem="not a folder")
    tasks: list[Task] = []
    errors: list[TaskFormatError] = []
    for child in sorted(path.iterdir()):
        if not child.is_dir() or child.name.startswith((".", "_")):
            continue
        try:
            tasks.append(load_task(child))
        except TaskFormatError as exc:
            errors.append(exc)
    if errors:
        raise SuiteFormatError(path, errors)
    unavailable = _unconverted(path)
    if not tasks and not unavailable:
        raise SuiteFormatError(path, problem="no task folders found")
    unavailable.update({t.id: reason for t in tasks if (reason := unmet(t.spec.grader)) is not None})
    runnable = [t for t in tasks if t.id not in unavailable]
    return Suite(name=path.name, root=path, tasks=runnable, unavailable=unavailable)


def _unconverted(path: Path) -> dict[str, str]:
    """Instances a benchmark conversion left out, with the reason (see `benchmarks.materialise`)."""
    listed = path / "_unavailable.json"
    if not listed.is_file():
        return {}
    try:
        return {str(k): str(v) for k, v in json.loads(listed.read_text(encoding="utf-8")).items()}
    except (ValueError, AttributeError) as exc:
        raise SuiteFormatError(path, problem=f"_unavailable.json is not a JSON object: {exc}") from exc


def bundled_suite_path(name: str = DEFAULT_SUITE_NAME) -> Path:
    """Folder of a suite that ships with hitrate (default: the basic suite)."""
    path = BUNDLED_SUITES_DIR / name
    if not path.is_dir():
        available = sorted(p.name for p in BUNDLED_SUITES_DIR.iterdir() if p.is_dir()) if BUNDLED_SUITES_DIR.is_dir() else []
        raise FileNotFoundError(f"no bundled suite {name!r}; bundled suites: {available}")
    return path


def resolve_suite_path(suite: str | None) -> Path:
    """A suite argument as given on the command line: a folder path, or the name of a bundled suite."""
    if suite is None:
        return bundled_suite_path()
    as_path = Path(suite)
    if as_path.is_dir():
        return as_path
    if "/" not in suite and (BUNDLED_SUITES_DIR / suite).is_dir():
        return BUNDLED_SUITES_DIR / suite
    raise FileNotFoundError(f"suite {suite!r} is neither a folder nor a bundled suite name")
