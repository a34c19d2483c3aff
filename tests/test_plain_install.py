"""`pip install hitrate` with no extras: the built wheel installed, with its base dependencies
resolved for real (from the local pip cache or the registry, as pip is configured), into a fresh
virtual environment that has no torch, matplotlib or transformers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(cmd: list[str], env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_wheel_without_extras_runs_the_light_commands(tmp_path: Path) -> None:
    build = _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(ROOT)],
                 dict(os.environ))
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("hitrate-*.whl"))
    venv = tmp_path / "venv"
    # The interpreter's own venv module, not the test environment's: nothing of .venv leaks in.
    assert _run([sys.executable, "-m", "venv", str(venv)], dict(os.environ)).returncode == 0
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    install = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], env)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]

    python = str(venv / "bin" / "python")
    for missing in ("torch", "transformers", "matplotlib"):
        probe = _run([python, "-c", f"import importlib.util, sys; sys.exit(importlib.util.find_spec({missing!r}) is not None)"], env)
        assert probe.returncode == 0, f"{missing} was installed without its extra"

    hitrate = str(venv / "bin" / "hitrate")
    env = {**env, "HITRATE_DB": str(tmp_path / "ledger.db"), "HITRATE_CONFIG": str(tmp_path / "none.toml"), "COLUMNS": "80"}
    run_dir = tmp_path / "elsewhere"  # not the source tree, so `hitrate` cannot import it from there
    run_dir.mkdir()

    def hitrate_cmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([hitrate, *args], capture_output=True, text=True, timeout=120, env=env, cwd=run_dir)

    helped = hitrate_cmd("--help")
    assert helped.returncode == 0, helped.stderr
    assert "run" in helped.stdout and "ledger" in helped.stdout and "serve" in helped.stdout
    version = hitrate_cmd("--version")
    assert version.returncode == 0 and version.stdout.strip() == "hitrate 0.1.0"
    prices = hitrate_cmd("prices", "--model", "sonnet")
    assert prices.returncode == 0, prices.stderr
    assert "claude-sonnet-5 " in prices.stdout and all(len(line) <= 80 for line in prices.stdout.splitlines())
    empty = hitrate_cmd("ledger")
    assert empty.returncode == 0 and "no calls recorded yet" in empty.stdout, empty.stderr
    # A ledger with a call in it, written by the installed package itself.
    write = _run([python, "-c", (
        "from hitrate.store.ledger import Ledger; from hitrate.store.normalize import from_anthropic; "
        "from hitrate.store.records import CallRecord, utc_now; from hitrate.store.prices import PriceTable\n"
        "with Ledger() as l: l.record_call(CallRecord(session_id='s-1', backend='anthropic', model='claude-sonnet-5', "
        "started_at=utc_now(), usage=from_anthropic({'input_tokens': 5, 'cache_creation_input_tokens': 0, "
        "'cache_read_input_tokens': 2000, 'output_tokens': 40})), price_table=PriceTable.default())"
    )], env)  # fmt: skip
    assert write.returncode == 0, write.stderr
    ledger = hitrate_cmd("ledger")
    assert ledger.returncode == 0, ledger.stderr
    assert "s-1" in ledger.stdout and "claude-sonnet-5" in ledger.stdout and "$0.0" in ledger.stdout
    served = hitrate_cmd("serve", "some/model")
    assert served.returncode == 2
    assert "pip install 'hitrate[local]'" in served.stderr and "Traceback" not in served.stderr
