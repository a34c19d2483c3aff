"""Aider's polyglot benchmark and Exercism tracks: exercise folders as hitrate tasks.

An exercise folder holds `.meta/config.json` whose `files` lists the `solution` files (the stubs
the solver edits), the `test` files and the `example` (reference) solution; the instruction is
`.docs/introduction.md` + `.docs/instructions.md` + `.docs/instructions.append.md`, followed by
what Aider's benchmark adds (edit only the listed files, keep the names, standard library only).
Accepted layouts: a polyglot checkout (`<track>/exercises/practice/<slug>/`), one track
(`exercises/practice/<slug>/`), a folder of exercises, or one exercise.

Grading follows Aider's benchmark: the original test files are put back, then the track's test
command runs and exit status 0 is a pass. Python exercises are graded by hitrate's pytest grading
(every test of the test file must pass, which is the same verdict, per test); other tracks run
their command when its toolchain is on PATH (`requires`), and are listed as unavailable otherwise.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError

from hitrate.evals.benchmarks.materialise import BenchmarkError, copy_file, write_task_toml

LICENCE = "MIT (Exercism tracks)"
ADDENDUM = (
    "\n\n####\n\nUse the instructions above to change these files: {files}\n"
    "Keep the names of the existing functions, classes and files: the tests refer to them.\n"
    "Use only the language's standard library; do not install packages.\n"
)
LIMITS = {"max_steps": 40, "max_cost_usd": 2.0, "max_wall_s": 1200.0}

JUNIT_CONSOLE = "/usr/share/java/junit-platform-console-standalone.jar"
TEST_JARS = ("/usr/share/java/assertj-core.jar", "/usr/share/java/byte-buddy.jar")

# Per track: the test command Aider's benchmark runs (`benchmark/benchmark.py`, `npm-test.sh`,
# `cpp-test.sh`), in offline form, the programs it needs, and environment that keeps caches in
# the grading folder (the sandbox makes everything else read-only).
TRACKS: dict[str, dict[str, Any]] = {
    "rust": {
        "command": ["cargo", "test", "--offline", "--", "--include-ignored"],
        "requires": ["cargo"],
        "env": {"CARGO_TARGET_DIR": "target"},
    },
    "go": {
        "command": ["go", "test", "./..."],
        "requires": ["go"],
        "env": {"GOCACHE": ".cache/go-build", "GOPATH": ".cache/go", "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"},
        # The standard library's build and vet results, warmed once outside the graded folder.
        "seeded_caches": {"GOCACHE": "go"},
    },
    "cpp": {
        "command": ["sh", "-c", "mkdir -p build && cd build && cmake -DEXERCISM_RUN_ALL_TESTS=1 -G 'Unix Makefiles' .. && make"],
        "requires": ["cmake", "make", "g++"],
    },
    # Exercism's JavaScript tests run under jest; `xtest` (skipped) cases are switched on, as
    # Aider's npm-test.sh does. jest and the babel preset come from the packages `hitrate suite
    # prepare javascript` installs once, linked in as node_modules.
    "javascript": {"command": ["node", "node_modules/jest/bin/jest.js", "--ci"], "requires": ["node"],
                   "linked_packages": {"node_modules": "javascript"}, "address_space_limit": False},
    # The tracks build with gradle, whose wrapper downloads it and whose build fetches JUnit and
    # AssertJ from Maven Central. Offline, the same tests run on Debian's packaged JUnit 5 and
    # AssertJ (apt-get install junit5 libassertj-core-java): javac, then JUnit's console launcher.
    "java": {
        "command": ["sh", "-c", "mkdir -p build/classes && javac -nowarn -encoding UTF-8 -d build/classes -cp \"$JUNIT_CONSOLE:$TEST_CLASSPATH\" "
                    "$(find src -name '*.java') && java -jar \"$JUNIT_CONSOLE\" --disable-banner --details=summary --fail-if-no-tests "
                    "--class-path \"build/classes:$TEST_CLASSPATH\" --scan-class-path"],
        "requires": ["javac", "java"],
        "files": [JUNIT_CONSOLE, *TEST_JARS],
        "env": {"JUNIT_CONSOLE": JUNIT_CONSOLE, "TEST_CLASSPATH": ":".join(TEST_JARS)},
    },
}
_BUILD_DIRS = {"target", "node_modules", "build", "__pycache__", ".pytest_cache", ".gradle"}
SUFFIX_TRACK = {".py": "python", ".rs": "rust", ".go": "go", ".cpp": "cpp", ".h": "cpp", ".js": "javascript", ".java": "java"}


def find_exercises(source: Path) -> list[Path]:
    if (source / ".meta" / "config.json").is_file():
        return [source]
    found: list[Path] = []
    for pattern in ("*/exercises/practice/*/.meta/config.json", "exercises/practice/*/.meta/config.json", "*/.meta/config.json"):
        found.extend(p.parent.parent for p in source.glob(pattern))
    unique = sorted(set(found))
    if not unique:
        raise BenchmarkError(f"{source}: no Exercism exercise (a folder with .meta/config.json) found")
    return unique


def _track(exercise: Path, solution_files: list[str]) -> str:
    """The track: the folder above `exercises/` when it names one (a polyglot checkout), else the
    language of the solution files (a track cloned under another name, a lone exercise)."""
    parts = exercise.parts
    if "exercises" in parts:
        index = parts.index("exercises")
        if index > 0 and (parts[index - 1].lower() == "python" or parts[index - 1].lower() in TRACKS):
            return parts[index - 1].lower()
    for rel in solution_files:
        track = SUFFIX_TRACK.get(Path(rel).suffix)
        if track:
            return track
    return "unknown"


def _config(exercise: Path) -> dict[str, list[str]]:
    try:
        raw = json.loads((exercise / ".meta" / "config.json").read_text(encoding="utf-8"))
        files = raw["files"]
        return {key: [str(f) for f in files.get(key) or []] for key in ("solution", "test", "example")}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f".meta/config.json has no usable 'files' table ({exc})") from exc


def instruction(exercise: Path, solution_files: list[str]) -> str:
    docs = exercise / ".docs"
    parts = [(docs / name).read_text(encoding="utf-8").strip() for name in ("introduction.md", "instructions.md", "instructions.append.md") if (docs / name).is_file()]
    if not parts:
        raise ValueError("no .docs/instructions.md")
    return "\n\n".join(parts) + ADDENDUM.format(files=" ".join(solution_files))


def example_targets(examples: list[str], solutions: list[str]) -> dict[str, str]:
    """Where each example (reference) file goes in the solution: over the solution file with the
    same name; else over the one solution file of its suffix no example of that name claims
    (`.meta/example.py` -> `leap.py`, `.meta/example.rs` -> `src/lib.rs`); else, as a helper
    class of the reference (Java's `Frame.java` beside `BowlingGame.java`), beside the solution
    files of its suffix under its own name. The answer does not depend on the order of the lists."""
    by_name = {Path(s).name: s for s in solutions}
    targets = {e: by_name[Path(e).name] for e in examples if Path(e).name in by_name}
    claimed = set(targets.values())
    for suffix in sorted({Path(e).suffix for e in examples if e not in targets}):
        rest = sorted(e for e in examples if e not in targets and Path(e).suffix == suffix)
        free = [s for s in solutions if Path(s).suffix == suffix and s not in claimed]
        same_suffix = [s for s in solutions if Path(s).suffix == suffix]
        if len(rest) == 1 and len(free) == 1:
            targets[rest[0]] = free[0]
        elif not free and same_suffix:
            folder = Path(same_suffix[0]).parent
            for example in rest:
                targets[example] = (folder / Path(example).name).as_posix()
        else:
            raise ValueError(f"example files {rest} match no solution file of {solutions}")
    return {e: targets[e] for e in examples}


def python_test_ids(test_file: Path, rel: str) -> list[str]:
    """pytest node ids of the test file's tests, read from its source (unittest classes, their
    test methods, and top-level test functions)."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    ids: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    ids.append(f"{rel}::{node.name}::{item.name}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            ids.append(f"{rel}::{node.name}")
    return ids


def _difficulty(exercise: Path, slug: str) -> str:
    # A track's config.json rates each practice exercise from 1 to 10.
    track_config = exercise.parent.parent.parent / "config.json"
    try:
        entries = json.loads(track_config.read_text(encoding="utf-8"))["exercises"]["practice"]
        rating = next(int(e["difficulty"]) for e in entries if e.get("slug") == slug)
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return "medium"
    return "easy" if rating <= 3 else ("medium" if rating <= 6 else "hard")


def convert_exercise(exercise: Path, out: Path, source: Path) -> tuple[str, str | None]:
    """Write one task folder; returns (task id, None), or (task id, why it was left out)."""
    try:
        files = _config(exercise)
    except (OSError, ValueError) as exc:
        return _task_id("unknown", exercise.name), str(exc)
    track = _track(exercise, files["solution"])
    task_id = _task_id(track, exercise.name)
    if track != "python" and track not in TRACKS:
        return task_id, f"no test command known for the {track} track"
    if not files["solution"] or not files["test"] or not files["example"]:
        return task_id, ".meta/config.json lists no solution, test or example files"
    try:
        text = instruction(exercise, files["solution"])
        targets = example_targets(files["example"], files["solution"])
    except (OSError, ValueError) as exc:
        return task_id, str(exc)
    if track == "java" and (libraries := _gradle_libraries(exercise / "build.gradle")):
        return task_id, f"its build.gradle needs {', '.join(libraries)}, which the offline Java runner (JUnit 5 and AssertJ) does not provide"
    task_dir = out / task_id
    # The solver sees the exercise without its tests, its reference and its docs (the instruction
    # carries those), nor build output left in the checkout.
    tests = set(files["test"])
    for path in sorted(exercise.rglob("*")):
        rel = path.relative_to(exercise)
        if path.is_file() and rel.parts[0] not in (".meta", ".docs") and not set(rel.parts) & _BUILD_DIRS and rel.as_posix() not in tests:
            copy_file(path, task_dir / "workspace" / rel)
    for example, target in targets.items():
        copy_file(exercise / example, task_dir / "solution" / target)
    needs: dict[str, Any] = {}  # what the build needs beyond the toolchain
    if track == "cpp":
        needs = {"headers": _boost_headers(exercise / "CMakeLists.txt")}
    if track == "rust":
        try:
            needs = _rust_manifests(exercise, task_dir)
        except ValueError as exc:
            shutil.rmtree(task_dir)
            return task_id, str(exc)
    spec: dict[str, Any] = {
        "id": task_id,
        "title": f"Exercism {track}: {exercise.name}",
        "tags": ["exercism", track],
        "difficulty": _difficulty(exercise, exercise.name),
        "limits": dict(LIMITS),
        "source": {"benchmark": "aider-polyglot", "instance": f"{track}/{exercise.name}", "paths": [str(source)], "licence": LICENCE},
    }
    if track == "python":
        ids: list[str] = []
        for rel in files["test"]:
            dest = f"tests/{Path(rel).name}"
            copy_file(exercise / rel, task_dir / dest)
            ids.extend(python_test_ids(exercise / rel, dest))
        if not ids:
            shutil.rmtree(task_dir)
            return task_id, "its test files define no tests"
        # Aider's rule is per task: the exercise as a whole fails at the start (some stubs pass a
        # test or two already), and every test passes once it is solved.
        spec["tests"] = {"command": "pytest tests", "timeout_s": 180.0, "fail_to_pass": ids, "fails_at_start": "any"}
    else:
        for rel in files["test"]:
            copy_file(exercise / rel, task_dir / "tests" / rel)
            # Skipped cases are switched on, as Aider's benchmark does: JavaScript's `xtest`,
            # Java's `@Disabled("Remove to run test")`.
            test = task_dir / "tests" / rel
            if track == "javascript":
                test.write_text(re.sub(r"\bxtest\(", "test(", test.read_text(encoding="utf-8")), encoding="utf-8")
            elif track == "java":
                test.write_text(re.sub(r"^[ \t]*@Disabled(\([^)]*\))?[ \t]*\n", "", test.read_text(encoding="utf-8"), flags=re.M), encoding="utf-8")
        spec["grader"] = {"kind": "command", "language": track, "test_files": list(files["test"]), **TRACKS[track],
                          "grading_folder": exercise.name, **needs}  # fmt: skip
    (task_dir / "instruction.md").write_text(text, encoding="utf-8")
    write_task_toml(task_dir, spec)
    return task_id, None


_GRADLE_LIBRARY = re.compile(r"""^\s*(?:implementation|api|compile)\s*\(?\s*["']([^"':]+:[^"':]+(?::[^"']+)?)["']""", re.MULTILINE)


def _gradle_libraries(build_gradle: Path) -> list[str]:
    """Libraries a Java exercise's code depends on besides the test ones (hangman's RxJava,
    rest-api's org.json)."""
    try:
        return _GRADLE_LIBRARY.findall(build_gradle.read_text(encoding="utf-8"))
    except OSError:
        return []


_BOOST = re.compile(r"find_package\(\s*Boost\b[^)]*\bREQUIRED\b[^)]*\bCOMPONENTS\s+([^)]*)\)", re.IGNORECASE)


def _boost_headers(cmakelists: Path) -> list[str]:
    """The Boost headers a C++ exercise's CMakeLists.txt requires (gigasecond's and meetup's
    `find_package(Boost 1.58 REQUIRED COMPONENTS date_time)`)."""
    try:
        text = cmakelists.read_text(encoding="utf-8")
    except OSError:
        return []
    return [f"boost/{component}.hpp" for found in _BOOST.findall(text) for component in found.split()]


def _dependencies(manifest: Path) -> dict[str, Any]:
    try:
        table = tomlkit.parse(manifest.read_text(encoding="utf-8")).get("dependencies") or {}
    except (OSError, ParseError) as exc:
        raise ValueError(f"{manifest.name} cannot be read: {exc}") from exc
    return dict(table)


def _requirement(spec: Any) -> str:
    """A dependency's version requirement: `"1.0"`, or a table's `version` (`{ version = "0.8",
    features = [...] }`)."""
    return str(spec.get("version", "*")) if isinstance(spec, dict) else str(spec)


def _rust_manifests(exercise: Path, task_dir: Path) -> dict[str, dict[str, str]]:
    """The crates the exercise's Cargo.toml needs, and those only its reference needs, with their
    version requirements: the reference's dependencies live in `.meta/Cargo-example.toml`, and
    go into the solution's Cargo.toml (the exercise's own, with those dependencies added) for the
    oracle's run."""
    own = exercise / "Cargo.toml"
    needed = _dependencies(own) if own.is_file() else {}
    example = exercise / ".meta" / "Cargo-example.toml"
    extra = {name: spec for name, spec in _dependencies(example).items() if name not in needed} if example.is_file() else {}
    if extra and own.is_file():
        manifest = tomlkit.parse(own.read_text(encoding="utf-8"))
        table = manifest.setdefault("dependencies", tomlkit.table())
        for name, spec in _dependencies(example).items():
            table[name] = spec
        (task_dir / "solution" / "Cargo.toml").write_text(tomlkit.dumps(manifest), encoding="utf-8")
    return {"crates": {n: _requirement(s) for n, s in sorted(needed.items())},
            "oracle_crates": {n: _requirement(s) for n, s in sorted(extra.items())}}  # fmt: skip


def _task_id(track: str, slug: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{track}-{slug}".lower()).strip("-")


def convert(source: Path, out: Path, repos: Path | None) -> dict[str, str]:
    if repos is not None:
        raise BenchmarkError("--repos is for swebench:FILE.jsonl suites")
    unavailable: dict[str, str] = {}
    for exercise in find_exercises(source):
        task_id, reason = convert_exercise(exercise, out, source)
        if reason is not None:
            unavailable[task_id] = reason
    return unavailable
