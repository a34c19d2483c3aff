"""`hitrate tui`: the interactive app. Registered through the `hitrate.commands` entry point, since
the harness's CLI must not import the TUI."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn, Optional

import typer

from hitrate.harness.cli import add_command

EXIT_USAGE = 2


def register(app: typer.Typer) -> None:
    add_command(app, "tui", tui_command)


def _resumable(db: Optional[Path], session_id: str) -> tuple[str, str | None, str | None]:
    """(whole id, model spec, workspace) of the session to resume (given by its id or a unique
    prefix), so it goes on where its cache and its files are; exits with a usage error when there
    is no such session to resume."""
    from hitrate.harness.resume import SessionNotResumable, load_session
    from hitrate.harness.transcript_log import StoredTranscriptError
    from hitrate.store.ledger import Ledger, default_ledger_path

    path = db or default_ledger_path()
    if not path.is_file():
        _fail(f"no saved transcript for session {session_id}: there is no ledger at {path}")
    from hitrate.harness.commands.sessions import SessionLookupError, resolve_session

    try:
        with Ledger(path) as ledger:
            try:
                session_id = resolve_session(ledger, session_id)  # a unique prefix of the id is enough
            except SessionLookupError:
                pass  # load_session names the id it cannot find
            stored = load_session(ledger, session_id)
    except (SessionNotResumable, StoredTranscriptError) as exc:
        _fail(str(exc))
    return session_id, stored.stored.model_spec or stored.record.model_spec, stored.record.workspace


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)


def tui_command(
    model: Optional[str] = typer.Option(
        None, "--model", "-m",
        help="provider/model: anthropic/…, openai/… (openai-chat/… for Chat Completions), deepseek/…, gemini/…, "
        "openrouter/<vendor>/…, azure/<deployment>, bedrock/<model id>, vertex/…, openai-compat/<model>@<url>, "
        "local/<path or hub id>. Default: $HITRATE_MODEL, the config file, the first provider with a key, "
        "else a small local model. /model switches later.",
    ),
    workspace: Optional[Path] = typer.Option(
        None, "--workspace", "-w",
        help="The project the agent works in (its tools cannot leave it). Default: the resumed session's, else the current folder.",
    ),
    db: Optional[Path] = typer.Option(None, "--db", help="Ledger file (default: $HITRATE_DB or the user data dir)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue this session (its id from /resume or `hitrate ledger`)."),
    approve: bool = typer.Option(True, "--approve/--no-approve", help="Ask before shell commands and file writes."),
    permissions: Optional[str] = typer.Option(
        None, "--permissions",
        help="ask, allow or deny: what happens to a shell command or file change that no rule in the config "
        "file's [permissions] allow / deny lists matches. Default: the file's `default`, else ask.",
    ),
    max_steps: int = typer.Option(50, "--max-steps", min=1, help="Most model calls per prompt."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", min=0, help="Stop a prompt's work once the session has spent this many USD."),
    max_output_tokens: Optional[int] = typer.Option(
        None, "--max-output-tokens", min=1, help="max_tokens of each call (default: room for thinking on models that think by default)."
    ),
    effort: Optional[str] = typer.Option(
        None, "--effort", help="Reasoning effort: low, medium, high or max, in each backend's own parameter. "
        "Default: the config file's `effort`, else the model's own.",
    ),
    keepalive: bool = typer.Option(
        True, "--keepalive/--no-keepalive",
        help="While you are idle, re-warm the cached prefix before its TTL runs out, but only when the expected "
        "saving beats the warm-up's cost (never on DeepSeek, local or self-hosted servers). /keepalive switches it.",
    ),
    cache_ttl: Optional[str] = typer.Option(
        None, "--cache-ttl", help="5m or 1h: lifetime of the cache marks on routes with Anthropic's cache. "
        "Default: the config file's `cache_ttl`, else 5m.",
    ),
) -> None:
    """Work with the agent interactively and watch the prompt cache.

    Every call's read / write / fresh / output tokens, the session's cost and Σ-hit ratio, how long
    the cached prefix stays warm, and why any call missed. /help inside lists the commands."""
    # Bad input is refused before anything heavy loads (Textual, the router, the provider SDKs: seconds
    # of CPU on a busy machine); `hitrate --help` never loads them at all.
    from hitrate.harness.commands.early_checks import check_spec
    from hitrate.harness.commands.models import default_model_or_offer
    from hitrate.harness.defaults import chosen_effort, config_path
    from hitrate.harness.models import ModelSpecError

    if permissions not in (None, "ask", "allow", "deny"):
        _fail(f"--permissions must be ask, allow or deny, not {permissions!r}")
    if cache_ttl not in (None, "5m", "1h"):
        _fail(f"--cache-ttl must be 5m or 1h, not {cache_ttl!r}")
    if resume is None and workspace is not None and not workspace.expanduser().is_dir():
        _fail(f"workspace {workspace.expanduser().resolve()} is not a directory")
    if model is not None:
        try:
            check_spec(model)  # a misspelt --model or a missing key: refused before the router loads
        except ModelSpecError as exc:
            _fail(str(exc))
    try:
        level = chosen_effort(effort)
    except ModelSpecError as exc:
        _fail(str(exc))
    stored_spec: str | None = None
    keep_workspace = workspace is not None
    if resume is not None:
        resume, stored_spec, stored_workspace = _resumable(db, resume)
        if workspace is None and stored_workspace is not None:
            workspace = Path(stored_workspace)
    ws = (workspace or Path(".")).expanduser().resolve()
    if not ws.is_dir():
        _fail(f"workspace {ws} is not a directory")
    from hitrate.harness.permissions import PermissionRuleError, Permissions

    try:
        rules = Permissions.load(config_path(), default=permissions)  # type: ignore[arg-type]
    except PermissionRuleError as exc:
        _fail(str(exc))
    try:
        spec = model or stored_spec or default_model_or_offer()
        check_spec(spec)
    except ModelSpecError as exc:  # NoModelError too
        _fail(str(exc))

    from hitrate.harness.agent import AgentLimits
    from hitrate.harness.checkpoints import CheckpointError, Checkpoints
    from hitrate.harness.compaction_settings import compaction_keys
    from hitrate.harness.keepalive import KeepAliveConfig
    from hitrate.harness.router import Router
    from hitrate.harness.session import SessionConfig
    from hitrate.tui.app import HitrateApp
    from hitrate.tui.harness_link import HarnessLink
    from hitrate.store.ledger import default_ledger_path
    from hitrate.tools.confine import hide_from_commands

    hide_from_commands(db or default_ledger_path(), config_path())  # wherever --db, $HITRATE_DB or $HITRATE_CONFIG put them
    try:
        if spec.startswith("local/"):
            typer.echo(f"loading {spec} …", err=True)
        link = HarnessLink(
            spec,
            ws,
            db,
            router=Router(cache_ttl=cache_ttl),
            limits=AgentLimits(max_steps=max_steps, max_cost_usd=max_cost),
            session_config=SessionConfig(max_output_tokens=max_output_tokens, label="tui", effort=level,
                                         **compaction_keys(config_path())),
            keepalive=KeepAliveConfig(enabled=keepalive),
        )
    except ModelSpecError as exc:
        _fail(str(exc))
    try:
        resumed = None
        if resume is not None:
            try:
                resumed = link.resume(resume, keep_model=model is not None, keep_workspace=keep_workspace)
            except (KeyError, ValueError) as exc:
                _fail(str(exc.args[0] if exc.args else exc))
        try:
            checkpoints: Checkpoints | None = Checkpoints(ws)
        except CheckpointError as exc:
            typer.echo(f"warning: {exc}", err=True)
            checkpoints = None
        app = HitrateApp(link, approvals=approve, workspace=ws, resumed=resumed, permissions=rules, checkpoints=checkpoints)
        app.run()
    finally:
        link.close()
    typer.echo(f"session {link.session_id} is in the ledger ({link.ledger.path}); hitrate tui --resume {link.session_id} continues it")
