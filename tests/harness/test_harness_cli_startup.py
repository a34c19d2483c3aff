"""Every command starts without importing what it does not use: the provider SDKs, matplotlib,
torch, transformers and textual load only in the commands that need them, so `hitrate --help`,
`prices` and `ledger` start in a fraction of a second (benchmarks/bench_startup.py measures it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Not numpy: sqlite-utils imports it when it is installed, and it costs little.
HEAVY = ("anthropic", "openai", "matplotlib", "torch", "transformers", "textual", "fastapi", "uvicorn")

# Runs the CLI's entry point in a fresh interpreter, then reports which top-level packages it loaded.
_PROBE = """
import json, sys
from hitrate.harness import cli
sys.argv = ["hitrate", *json.loads(sys.argv[1])]
code = 0
try:
    cli.main()
except SystemExit as exc:
    code = exc.code or 0
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}), file=sys.stderr)
"""


def _loaded(args: list[str], env_db: Path) -> tuple[int, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args)],
        capture_output=True, text=True, timeout=120,
        env={"HITRATE_DB": str(env_db), "PATH": "/usr/bin:/bin", "COLUMNS": "80", "HOME": str(env_db.parent)},
    )  # fmt: skip
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["prices", "-m", "sonnet"], ["ledger"], ["run", "--help"],
                                  ["report", "--help"], ["whatif", "--help"], ["serve", "--help"], ["tui", "--help"]])
def test_light_commands_import_no_heavy_library(args: list[str], tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    if args == ["ledger"]:
        from hitrate.store.ledger import Ledger
        from hitrate.store.normalize import from_anthropic
        from hitrate.store.records import CallRecord, utc_now

        with Ledger(db) as ledger:
            ledger.record_call(CallRecord(session_id="s1", backend="anthropic", model="claude-sonnet-5", started_at=utc_now(), usage=from_anthropic(
                {"input_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100, "output_tokens": 3})))
    code, modules = _loaded(args, db)
    assert code == 0
    assert not modules & set(HEAVY), f"hitrate {' '.join(args)} imported {sorted(modules & set(HEAVY))}"


def test_the_probe_sees_a_heavy_import_when_there_is_one(tmp_path: Path) -> None:
    # `lint` builds a real prompt through the router, which loads the provider adapters: the
    # probe must notice, or the test above could not fail.
    (tmp_path / "ws").mkdir()
    code, modules = _loaded(["lint", "-w", str(tmp_path / "ws"), "-m", "anthropic/claude-sonnet-5"], tmp_path / "ledger.db")
    assert code == 0 and "anthropic" in modules


def test_version_and_help(tmp_path: Path) -> None:
    from importlib.metadata import version

    env = {"HITRATE_DB": str(tmp_path / "l.db"), "PATH": "/usr/bin:/bin", "COLUMNS": "80", "HOME": str(tmp_path)}
    run = [sys.executable, "-c", "from hitrate.harness.cli import main; main()"]
    shown = subprocess.run([*run, "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0 and shown.stdout.strip() == f"hitrate {version('hitrate')}"
    helped = subprocess.run([*run, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert helped.returncode == 0 and "--version" in helped.stdout
