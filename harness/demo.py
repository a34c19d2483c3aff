"""An offline one-session demonstration of the whole harness, with no key and no network.

`run_demo()` shows one agent session call by call. `ensure_demo_model()` and `cache_dir()` are
also what `hitrate demo` (the eval-suite demonstration in hitrate.evals) builds its model with.

A tiny random-weight model is built once into a cache folder (engine/tiny.py), served by the bundled
engine on 127.0.0.1, and driven through the real projection, the real Anthropic adapter and the
ledger. The conversation is a recorded script (`demo_script.json`: a small workspace with one bug
and the assistant turns that fix it), replayed with `ReplayPolicy`: every request is really sent and
really cached, but the random model's own replies (noise) are not used. What it shows is the
caching, call by call: not model quality.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TextIO

import platformdirs
from pydantic import BaseModel

from hitrate.harness.agent import Agent, AgentLimits, AgentResult
from hitrate.harness.events import EventSink
from hitrate.harness.policy import RecordedTurn, ReplayPolicy
from hitrate.harness.printer import TerminalPrinter
from hitrate.harness.router import Router
from hitrate.harness.session import Session, SessionConfig
from hitrate.store.cost import cost
from hitrate.store.ledger import Ledger, default_ledger_path
from hitrate.store.usage import WRITE_BUCKETS, Usage

SCRIPT_FILE = "demo_script.json"
ENV_CACHE = "HITRATE_CACHE_DIR"
# Bump when the model recipe changes, so an old cached model is not reused.
MODEL_RECIPE = {"arch": "llama", "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "vocab_size": 512,
                "max_positions": 32768, "seed": 0}
MODEL_DIR_NAME = "demo-tiny-llama-v1"
ILLUSTRATION_MODEL = "claude-sonnet-5"

BANNER = (
    "hitrate demo: a CACHING demonstration with a tiny RANDOM-WEIGHT model (its replies are noise and are\n"
    "replaced by a recorded script; this shows prompt-cache behaviour, not model quality). Offline: the\n"
    "bundled engine serves the model on 127.0.0.1 and the harness talks to it through its Anthropic adapter."
)


class DemoScript(BaseModel):
    description: str = ""
    task: str
    files: dict[str, str]
    turns: list[RecordedTurn]


def load_script() -> DemoScript:
    text = resources.files("hitrate.harness").joinpath(SCRIPT_FILE).read_text(encoding="utf-8")
    return DemoScript.model_validate(json.loads(text))


def cache_dir(override: Path | None = None) -> Path:
    if override is not None:
        return override
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("hitrate", appauthor=False))


def ensure_demo_model(root: Path) -> Path:
    """The tiny model folder under `root`, built on first use (written to a temp folder, then renamed,
    so an interrupted build never leaves a half-written model behind)."""
    target = root / MODEL_DIR_NAME
    if (target / "config.json").is_file() and (target / "tokenizer.json").is_file():
        return target
    from hitrate.engine.tiny import build_tiny_model

    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        build_tiny_model(staging, **MODEL_RECIPE)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _quiet_progress_bars() -> None:
    """transformers draws progress bars while saving and loading even a tiny model; they would
    interleave with the demo's own output."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def write_workspace(files: dict[str, str], parent: Path | None = None) -> Path:
    ws = Path(tempfile.mkdtemp(prefix="hitrate-demo-", dir=parent))
    for rel, text in files.items():
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return ws


def illustration_lines(result: AgentResult) -> list[str]:
    """What the same token buckets would cost at a cloud model's prices, with and without the cache."""
    t = result.summary.totals
    if not result.summary.calls:
        return []
    now = datetime.now(timezone.utc)
    cached = Usage(fresh_input=t.fresh_input, cache_read=t.cache_read, output=t.output,
                   **{b: getattr(t, b) for b in WRITE_BUCKETS})
    prompt = (cached.prompt_tokens or 0)
    uncached = Usage(fresh_input=prompt, cache_read=0, output=t.output, **dict.fromkeys(WRITE_BUCKETS, 0))
    with_cache = cost(cached, ILLUSTRATION_MODEL, now).total
    without = cost(uncached, ILLUSTRATION_MODEL, now).total
    if with_cache is None or without is None:
        return []
    return [
        f"illustration only: these token counts at {ILLUSTRATION_MODEL} prices would cost ${with_cache:.4f} "
        f"with the cache vs ${without:.4f} with every prompt token sent fresh",
    ]


def run_demo(
    *,
    db: Path | None = None,
    cache: Path | None = None,
    out: TextIO | None = None,
    sink: EventSink | None = None,
    keep_workspace: bool = False,
) -> AgentResult:
    """Build (once) and serve the tiny model, replay the script through the real pipeline, print."""
    printer = TerminalPrinter(out, show_text=False)
    emit = sink or printer
    write = printer.out.write
    write(BANNER + "\n\n")
    _quiet_progress_bars()
    script = load_script()
    model_dir = ensure_demo_model(cache_dir(cache))
    workspace = write_workspace(script.files)
    # No environment: the demo never looks at keys or base URLs.
    route = Router(env={}, preflight=False).resolve(f"local/{model_dir}")
    try:
        with Ledger(db or default_ledger_path()) as ledger:
            session = Session(route, workspace, ledger=ledger, sink=emit,
                              config=SessionConfig(max_output_tokens=16, label="hitrate demo"))
            agent = Agent(session, policy=ReplayPolicy(script.turns), limits=AgentLimits(max_steps=len(script.turns) + 1))
            result = agent.run(script.task)
            write("\n".join(illustration_lines(result)) + "\n")
            write(f"ledger: {ledger.path} (session {session.id}; `hitrate ledger` summarizes it)\n")
    finally:
        route.close()
        if not keep_workspace:
            shutil.rmtree(workspace, ignore_errors=True)
    return result
