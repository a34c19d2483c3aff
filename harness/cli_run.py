"""`hitrate run` (the agent on a task) and `hitrate lint` (pre-flight checks of a workspace's prompt)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn, Optional

import typer

from hitrate.harness.agent import Agent, AgentLimits, AgentResult
from hitrate.harness.cli import add_command, fail
from hitrate.harness.defaults import default_model
from hitrate.harness.dynamic_context import workspace_context
from hitrate.harness.events import EventSink
from hitrate.harness.models import ModelSpecError, parse_model_spec
from hitrate.harness.policy import Policy
from hitrate.harness.printer import JsonLinesPrinter, TerminalPrinter
from hitrate.harness.resume import SessionNotResumable, load_session
from hitrate.harness.router import Route, Router, rules_for
from hitrate.harness.session import Session, SessionConfig, session_inputs
from hitrate.harness.transcript_log import StoredTranscriptError
from hitrate.projection.lint import lint
from hitrate.projection.project import Projector, ProjectionError
from hitrate.projection.transcript import TextBlock, Transcript, UserMessage
from hitrate.store.ledger import Ledger, default_ledger_path
from hitrate.store.prices import PriceTable
from hitrate.tools import confinement_notice

# Exit codes: what a script calling `hitrate run` can tell apart.
EXIT_OK = 0
EXIT_ERROR = 1  # a call failed for good
EXIT_USAGE = 2  # bad model spec, missing key, unreachable server, bad workspace
EXIT_LIMIT = 3  # a step / cost / wall-time limit stopped the agent
EXIT_CANCELLED = 130

_EXIT_FOR_STATUS = {
    "end_turn": EXIT_OK,
    "max_steps": EXIT_LIMIT,
    "max_cost": EXIT_LIMIT,
    "max_wall": EXIT_LIMIT,
    "max_tokens": EXIT_LIMIT,
    "cancelled": EXIT_CANCELLED,
    "error": EXIT_ERROR,
}


def register(app: typer.Typer) -> None:
    add_command(app, "run", run_command)
    add_command(app, "lint", lint_command)


def _fail(message: str) -> NoReturn:
    fail(message, EXIT_USAGE)


def _workspace(path: Path) -> Path:
    resolved = path.expanduser().resolve()
    if not resolved.is_dir():
        _fail(f"workspace {resolved} is not a directory")
    return resolved


def run_command(
    task: str = typer.Argument(..., help="What the agent should do (with --resume: the next instruction)."),
    model: Optional[str] = typer.Option(
        None, "--model", "-m",
        help="provider/model: anthropic/…, openai/…, deepseek/…, gemini/…, openai-compat/<model>@<url>, local/<path or hub id>. "
        "Default: the resumed session's model; else $HITRATE_MODEL, the config file, the first provider with a key, "
        "else a small local model.",
    ),
    workspace: Optional[Path] = typer.Option(
        None, "--workspace", "-w",
        help="The project the agent works in: file tools stay inside it, and the sandboxed shell can write only there (docs/security.md). Default: the resumed session's, else the current folder.",
    ),
    resume: Optional[str] = typer.Option(
        None, "--resume",
        help="Continue this session (its id from `hitrate ledger`): its transcript, cache key and totals carry on.",
    ),
    max_steps: int = typer.Option(50, "--max-steps", min=1, help="Most model calls."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", min=0, help="Stop before a call once this many USD are spent."),
    max_wall: Optional[float] = typer.Option(None, "--max-wall", min=0.001, help="Stop before a call after this many seconds."),
    max_output_tokens: int = typer.Option(4096, "--max-output-tokens", min=1, help="max_tokens of each call."),
    json_events: bool = typer.Option(False, "--json", help="Print one JSON event per line instead of text."),
    db: Optional[Path] = typer.Option(None, "--db", help="Ledger file (default: $HITRATE_DB or the user data dir)."),
) -> None:
    """Run the agent on TASK in a workspace and account for every call.

    Streams the model's text and tool activity, then a summary: tokens read from cache, written,
    fresh and output, the hit ratio, cost, and why any call missed the cache. With --resume, TASK
    continues a recorded session and the summary counts all of its calls. Exit codes: 0 done, 1 a
    call failed, 2 bad model / key / workspace / session, 3 a limit stopped the agent, 130 cancelled."""
    ledger_path = db or default_ledger_path()
    stored_spec: str | None = None
    if resume is not None:
        stored_spec, stored_workspace = _resumable(ledger_path, resume)
        if workspace is None and stored_workspace is not None:
            workspace = Path(stored_workspace)
    ws = _workspace(workspace or Path("."))
    # An unusable --db fails now (LedgerError, reported by the CLI), not after a model has loaded.
    Ledger(ledger_path).close()
    try:
        spec_text = model or stored_spec or default_model()
        route = Router().resolve(spec_text)
    except ModelSpecError as exc:
        _fail(str(exc))
    if max_cost is not None and PriceTable.default().find(route.model) is None:
        # Unpriced calls count as $0 towards the limit, so it would never fire.
        typer.echo(f"warning: cost limit cannot be enforced: {route.label} has no price", err=True)
    sink: EventSink = JsonLinesPrinter() if json_events else TerminalPrinter()
    unconfined = confinement_notice()
    if unconfined is not None:
        typer.echo(f"warning: {unconfined}", err=True)
    limits = AgentLimits(max_steps=max_steps, max_cost_usd=max_cost, max_wall_s=max_wall)
    try:
        result = run_task(route, ws, task, ledger_path=ledger_path, sink=sink, limits=limits,
                          config=SessionConfig(max_output_tokens=max_output_tokens), resume=resume)
    except (SessionNotResumable, StoredTranscriptError) as exc:
        _fail(str(exc))
    if unconfined is not None:
        typer.echo(f"warning: {unconfined}", err=True)  # again under the summary, where it is read
    raise typer.Exit(_EXIT_FOR_STATUS.get(result.status, EXIT_ERROR))


def _resumable(ledger_path: Path, session_id: str) -> tuple[str | None, str | None]:
    """(model spec, workspace) a session to resume last used; exits with a message if it cannot be."""
    if not ledger_path.is_file():
        _fail(f"no saved transcript for session {session_id}: there is no ledger at {ledger_path}")
    try:
        with Ledger(ledger_path) as ledger:
            stored = load_session(ledger, session_id)
    except (SessionNotResumable, StoredTranscriptError) as exc:
        _fail(str(exc))
    return stored.stored.model_spec or stored.record.model_spec, stored.record.workspace


def run_task(route: Route, workspace: Path, task: str, *, ledger_path: Path | None, sink: EventSink,
             limits: AgentLimits, config: SessionConfig, policy: Policy | None = None,
             resume: str | None = None) -> AgentResult:
    """Run one task to its end in a fresh session, or in session `resume` continued from the
    ledger; the route is closed afterwards."""
    with Ledger(ledger_path or default_ledger_path()) as ledger:
        try:
            if resume is None:
                session = Session(route, workspace, ledger=ledger, sink=sink, config=config)
            else:
                session = Session.resume(ledger, resume, route, workspace, sink=sink, config=config)
        except BaseException:
            route.close()
            raise
        try:
            return Agent(session, policy=policy, limits=limits).run(task)
        finally:
            session.close()


def lint_command(
    workspace: Path = typer.Option(Path("."), "--workspace", "-w", help="The project whose prompt to check."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Check against this model's caching rules."),
    task: str = typer.Option("(lint)", "--task", help="A stand-in first user message."),
) -> None:
    """Check the prompt hitrate would build for a workspace before sending it.

    Flags volatile text in the cached head, per-run values in tool schemas, tool order, cache marks
    below the model's minimum or over the provider's limit. Exits 1 on an error-level finding."""
    ws = _workspace(workspace)
    note = ""
    if model is None:
        try:
            model = default_model()
        except ModelSpecError:
            model = "anthropic/claude-sonnet-5"
            note = " (no model configured; checked against Anthropic's rules)"
    try:
        spec = parse_model_spec(model)
    except ModelSpecError as exc:
        _fail(str(exc))
    rules, _ = rules_for(spec)
    inputs = session_inputs(ws)
    transcript = Transcript().append(UserMessage(content=(TextBlock(text=task),)))
    try:
        prompt = Projector(rules).project(
            model=spec.model, tools=inputs.tool_specs, system=inputs.system, transcript=transcript,
            docs=inputs.docs, context=workspace_context(ws), rules=rules,
        )
    except ProjectionError as exc:
        _fail(f"cannot build the prompt: {exc}")
    findings = lint(prompt, rules)
    typer.echo(f"lint {ws} for {spec.label}{note}: head {prompt.head_tokens:,} tokens (estimate), "
               f"{len(prompt.breakpoints)} cache mark(s)")
    for f in findings:
        where = f.section or "prompt"
        if f.location:
            where += f" {f.location}"
        typer.echo(f"  {f.severity:<7} {f.code} [{where}] {f.message}")
    if not findings:
        typer.echo("  no findings")
    errors = sum(1 for f in findings if f.severity == "error")
    sys.stdout.flush()
    raise typer.Exit(1 if errors else 0)
