"""Published benchmarks as hitrate suites: `<kind>:<path>` names a benchmark on disk.

    aider-polyglot:PATH    Aider's polyglot benchmark / Exercism tracks (exercise folders)
    swebench:FILE.jsonl    SWE-bench instances: JSONL, parquet, or a saved datasets folder
                           (repositories from --repos DIR)
    terminal-bench:PATH    Terminal-Bench / Harbor task folders

Each adapter converts the benchmark's own files into hitrate's task format once, into a cache
folder keyed by what it read (`materialise`); nothing is downloaded. Conversion keeps the
benchmark's grading rules (`task_graders`), and instances that cannot be converted are listed,
with the reason, as unavailable.
"""

from __future__ import annotations

from pathlib import Path

from hitrate.evals.benchmarks.materialise import BenchmarkError, materialise
from hitrate.evals.task import resolve_suite_path

__all__ = ["BENCHMARK_KINDS", "BenchmarkError", "canonical_suite", "resolve_suite"]

BENCHMARK_KINDS = ("aider-polyglot", "swebench", "terminal-bench")


def _split(spec: str) -> tuple[str, str] | None:
    kind, sep, rest = spec.partition(":")
    if sep and kind in BENCHMARK_KINDS:
        if not rest:
            raise BenchmarkError(f"{spec!r}: give a path after '{kind}:'")
        return kind, rest
    return None


def canonical_suite(spec: str | None) -> str:
    """The suite argument as stored in a run's settings: an absolute folder, or `kind:/abs/path`."""
    if spec is not None and (split := _split(spec)) is not None:
        kind, rest = split
        path = Path(rest).expanduser().resolve()
        if not path.exists():
            raise FileNotFoundError(f"{kind} source {path} does not exist")
        return f"{kind}:{path}"
    return str(resolve_suite_path(spec).resolve())


def resolve_suite(spec: str | None, *, repos: str | None = None) -> Path:
    """The folder of hitrate tasks for a suite argument (a benchmark is converted first)."""
    if spec is not None and (split := _split(spec)) is not None:
        kind, rest = split
        source = Path(rest).expanduser().resolve()
        if kind == "aider-polyglot":
            from hitrate.evals.benchmarks.exercism import convert
        elif kind == "swebench":
            from hitrate.evals.benchmarks.swebench import convert
        else:
            from hitrate.evals.benchmarks.harbor import convert
        return materialise(kind, source, convert, repos=Path(repos).expanduser().resolve() if repos else None)
    if repos is not None:
        raise BenchmarkError("--repos is for swebench:FILE.jsonl suites")
    return resolve_suite_path(spec)
