"""SWE-bench instances as hitrate tasks: JSONL (one instance a line), the parquet files the
datasets publish, or a folder saved with `datasets`' save_to_disk.

Each instance gives `instance_id`, `repo`, `base_commit`, `problem_statement`, the gold `patch`,
the `test_patch`, and `FAIL_TO_PASS` / `PASS_TO_PASS` (JSON-encoded lists of test ids). The
workspace is the repository at `base_commit`, exported from a local clone or mirror found in the
repositories folder (`owner__name`, `owner/name` or `name`, with or without `.git`, or a git
bundle `owner__name.bundle`); the reference solution is the gold patch applied to it; the hidden
test is the test patch. Grading applies the test patch, runs the files it touches, and grades the
log with the official harness's parser and F2P / P2P report (`benchmark_grading`).

Tests run in the local sandbox when the repository's suite runs under pytest and its declared
Python dependencies (`python_deps`) are installed here; other instances need their official image and are listed
as unavailable with the reason.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from hitrate.evals.benchmark_grading import apply_patch
from hitrate.evals.benchmarks.materialise import BenchmarkError, write_task_toml
from hitrate.evals.benchmarks.python_deps import missing_distributions

# swebench.harness.constants.NON_TEST_EXTS: files in a test patch that are not test directives.
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")
# The official specs' pytest command for most Python repositories (MAP_REPO_VERSION_TO_SPECS).
PYTEST_COMMAND = ["-m", "pytest", "--no-header", "-rA", "--tb=no", "-p", "no:cacheprovider"]
PYTEST_PARSERS = {"parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2"}
# Repositories whose suites the official harness runs with their own runners, not pytest.
NON_PYTEST_REPOS = {"django/django": "runtests.py", "sympy/sympy": "bin/test"}
LIMITS = {"max_steps": 100, "max_cost_usd": 5.0, "max_wall_s": 3600.0}
DIFFICULTY = {"<15 min fix": "easy", "15 min - 1 hour": "medium", "1-4 hours": "hard", ">4 hours": "hard"}
ADDENDUM = (
    "\n\n---\nThe repository {repo} is checked out in your working directory at commit {commit}. "
    "Change its code so that the issue above is resolved. Hidden tests will be run on your changes; "
    "do not edit the existing tests."
)


class SwebenchInstance(BaseModel):
    """One line of a SWE-bench JSONL file (the fields hitrate reads; others are kept aside)."""

    model_config = ConfigDict(extra="ignore")

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = []
    version: str = ""
    difficulty: str | None = None
    image: str | None = None
    eval_script: str | None = None
    log_parser: str | None = None
    eval_type: str | None = None

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        # The datasets store both lists as JSON-encoded strings.
        return json.loads(value) if isinstance(value, str) else value


def _json_rows(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    try:
        if text.lstrip().startswith("["):
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise BenchmarkError(f"{path}: not JSON lines: {exc}") from exc


def _parquet_rows(path: Path) -> list[Any]:
    """A split as the datasets publish it on the Hugging Face hub (`data/test-*.parquet`)."""
    try:
        import pyarrow.parquet
    except ImportError as exc:
        raise BenchmarkError(f"{path}: reading parquet needs pyarrow: pip install 'hitrate[swebench]'") from exc
    try:
        return pyarrow.parquet.read_table(path).to_pylist()
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise BenchmarkError(f"{path}: not a parquet file: {exc}") from exc


def _saved_dataset_rows(path: Path) -> list[Any]:
    """A folder written by `datasets`' save_to_disk: one split, or a DatasetDict whose test split
    (or only split) is read."""
    try:
        import datasets
    except ImportError as exc:
        raise BenchmarkError(f"{path}: reading a saved dataset needs the datasets package: pip install 'hitrate[swebench]'") from exc
    try:
        loaded = datasets.load_from_disk(str(path))
    except (OSError, ValueError) as exc:
        raise BenchmarkError(f"{path}: not a dataset saved with save_to_disk: {exc}") from exc
    if isinstance(loaded, datasets.DatasetDict):
        splits = list(loaded)
        split = "test" if "test" in splits else (splits[0] if len(splits) == 1 else None)
        if split is None:
            raise BenchmarkError(f"{path}: a dataset with splits {splits} and no 'test' split; give one split's folder")
        loaded = loaded[split]
    return loaded.to_list()


SAVED_DATASET_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


def read_instances(path: Path) -> list[SwebenchInstance]:
    """The instances of a JSONL (or JSON array) file, a parquet file, or a saved `datasets` folder."""
    rows: list[Any]
    if path.is_dir() and any((path / marker).is_file() for marker in SAVED_DATASET_MARKERS):
        rows = _saved_dataset_rows(path)
    elif path.is_file() and path.suffix == ".parquet":
        rows = _parquet_rows(path)
    elif path.is_file():
        rows = _json_rows(path)
    else:
        raise BenchmarkError(f"{path}: not SWE-bench instances (a JSONL or parquet file, or a folder saved with datasets' save_to_disk)")
    instances = []
    for number, row in enumerate(rows, 1):
        try:
            instances.append(SwebenchInstance.model_validate(row))
        except ValidationError as exc:
            faults = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'instance'}: {e['msg']}" for e in exc.errors())
            raise BenchmarkError(f"{path}: instance {number} is malformed: {faults}") from exc
        except ValueError as exc:
            raise BenchmarkError(f"{path}: instance {number} is malformed: {exc}") from exc
    if not instances:
        raise BenchmarkError(f"{path}: no instances")
    return instances


def task_id_for(instance_id: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", instance_id.lower()).strip("-")


def test_directives(test_patch: str) -> list[str]:
    """The files a test patch touches, as the official harness lists them (`get_test_directives`)."""
    files = re.findall(r"^diff --git a/.* b/(.*)$", test_patch, flags=re.M)
    return [f for f in dict.fromkeys(files) if not f.endswith(NON_TEST_EXTS)]


def find_repo(repos: Path, repo: str) -> Path | None:
    owner, _, name = repo.partition("/")
    for candidate in (f"{owner}__{name}", f"{owner}/{name}", name):
        for suffix in ("", ".git", ".bundle"):
            path = repos / f"{candidate}{suffix}"
            if path.exists():
                return path
    return None


def _git(*args: str, cwd: Path | None = None) -> bytes:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def export_commit(repo: Path, commit: str, dest: Path, scratch: Path) -> None:
    """The files of `commit` (no history: the fix is in the repository's future) into dest."""
    if repo.is_file():  # a bundle: clone it once, bare
        bare = scratch / f"{repo.stem}.git"
        if not bare.exists():
            _git("clone", "--quiet", "--bare", str(repo), str(bare))
        repo = bare
    archive = _git("archive", "--format=tar", commit, cwd=repo)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")


def _changed_files(before: Path, after: Path) -> tuple[list[str], list[str]]:
    """(files added or changed, files deleted) going from `before` to `after`."""
    old = {p.relative_to(before).as_posix() for p in before.rglob("*") if p.is_file()}
    new = {p.relative_to(after).as_posix() for p in after.rglob("*") if p.is_file()}
    changed = sorted(f for f in new if f not in old or (before / f).read_bytes() != (after / f).read_bytes())
    return changed, sorted(old - new)


def _local_blocker(instance: SwebenchInstance, workspace: Path) -> str | None:
    parser = instance.log_parser or "parse_log_pytest"
    if instance.repo in NON_PYTEST_REPOS:
        return f"{instance.repo} runs its tests with {NON_PYTEST_REPOS[instance.repo]}, not pytest, locally unsupported"
    if parser not in PYTEST_PARSERS:
        return f"its tests are parsed by {parser}, not a pytest parser, so they need the official image"
    missing = missing_distributions(workspace)
    if missing:
        return f"its Python dependencies are not installed here (missing: {', '.join(missing)})"
    return None


def convert_instance(instance: SwebenchInstance, out: Path, repo_path: Path, scratch: Path, sources: list[str]) -> str | None:
    """Write one task folder; the reason when the instance cannot be converted."""
    task_dir = out / task_id_for(instance.instance_id)
    workspace = task_dir / "workspace"
    try:
        export_commit(repo_path, instance.base_commit, workspace, scratch)
    except (RuntimeError, tarfile.TarError, OSError) as exc:
        shutil.rmtree(task_dir, ignore_errors=True)
        return f"cannot export {instance.repo} at {instance.base_commit[:12]}: {exc}"
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        patched = Path(tmp) / "patched"
        shutil.copytree(workspace, patched, symlinks=True)
        gold = Path(tmp) / "gold.patch"
        gold.write_text(instance.patch, encoding="utf-8")
        error = apply_patch(gold, patched)
        if error is not None:
            shutil.rmtree(task_dir, ignore_errors=True)
            return f"the gold patch does not apply at {instance.base_commit[:12]}: {error}"
        changed, deleted = _changed_files(workspace, patched)
        if deleted:
            shutil.rmtree(task_dir, ignore_errors=True)
            return f"the gold patch deletes files ({', '.join(deleted[:3])}), which a solution overlay cannot express"
        for rel in changed:
            dest = task_dir / "solution" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(patched / rel, dest)
    (task_dir / "tests").mkdir(parents=True, exist_ok=True)
    (task_dir / "tests" / "test.patch").write_text(instance.test_patch, encoding="utf-8")
    directives = test_directives(instance.test_patch)
    if not directives:
        shutil.rmtree(task_dir, ignore_errors=True)
        return "the test patch touches no test file"
    text = instance.problem_statement.strip() + ADDENDUM.format(repo=instance.repo, commit=instance.base_commit[:12])
    (task_dir / "instruction.md").write_text(text, encoding="utf-8")
    grader: dict[str, Any] = {
        "kind": "swebench",
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "version": instance.version,
        "log_parser": instance.log_parser or "parse_log_pytest",
        "eval_type": instance.eval_type or "pass_and_fail",
        "test_files": directives,
        "test_command": [*PYTEST_COMMAND, *directives],
        "fail_to_pass": instance.FAIL_TO_PASS,
        "pass_to_pass": instance.PASS_TO_PASS,
    }
    if instance.image:
        grader["image"] = instance.image
    if instance.eval_script:
        grader["eval_script"] = instance.eval_script
    blocker = _local_blocker(instance, workspace)
    if blocker:
        grader["local_blocker"] = blocker
    write_task_toml(task_dir, {
        "id": task_dir.name,
        "title": f"SWE-bench {instance.instance_id}",
        "tags": ["swebench", instance.repo],
        "difficulty": DIFFICULTY.get(instance.difficulty or "", "medium"),
        "limits": dict(LIMITS),
        "grader": grader,
        "source": {"benchmark": "swebench", "instance": instance.instance_id, "paths": sources + [str(repo_path)]},
    })  # fmt: skip
    return None


def convert(source: Path, out: Path, repos: Path | None) -> dict[str, str]:
    instances = read_instances(source)
    repos = repos or source.parent / "repos"
    if not repos.is_dir():
        raise BenchmarkError(f"no repositories folder {repos}: give --repos DIR with local clones or mirrors")
    seen: set[str] = set()
    unavailable: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hitrate-swebench-") as scratch:
        for instance in instances:
            task_id = task_id_for(instance.instance_id)
            if task_id in seen:
                raise BenchmarkError(f"{source}: instance {instance.instance_id} appears twice")
            seen.add(task_id)
            repo_path = find_repo(repos, instance.repo)
            if repo_path is None:
                unavailable[task_id] = f"no clone of {instance.repo} in {repos}"
                continue
            reason = convert_instance(instance, out, repo_path, Path(scratch), [str(source)])
            if reason is not None:
                unavailable[task_id] = reason
    return unavailable
