"""`hitrate run` (the agent on a task) and `hitrate lint` (pre-flight checks of a workspace's prompt)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional

import typer

from hitrate.harness.cli import add_command, fail, require_extra
from hitrate.harness.commands.run_settings import chosen_effort_or_exit, session_config

# The agent, router and provider SDKs load when a command runs, not when `hitrate --help` lists it.
if TYPE_CHECKING:
    from hitrate.harness.agent import AgentLimits, AgentResult
    from hitrate.harness.events import EventSink
    from hitrate.harness.models import ModelSpec
    from hitrate.store.prices import PriceTable
    from hitrate.harness.policy import Policy
    from hitrate.harness.router import Route
    from hitrate.harness.session import SessionConfig
    from hitrate.tools.base import ApprovalHook

# Exit codes: what a script calling `hitrate run` can tell apart.
EXIT_OK = 0
EXIT_ERROR = 1  # a call failed for good
EXIT_USAGE = 2  # bad model spec, missing key, unreachable server, bad workspace
EXIT_LIMIT = 3  # a step / cost / wall-time / output / context limit stopped the agent
EXIT_REFUSED = 4  # the model refused (the refused turn was taken out of the history)
EXIT_CANCELLED = 130

_EXIT_FOR_STATUS = {
    "end_turn": EXIT_OK,
    "max_steps": EXIT_LIMIT,
    "max_cost": EXIT_LIMIT,
    "max_wall": EXIT_LIMIT,
    "max_tokens": EXIT_LIMIT,
    "context_full": EXIT_LIMIT,
    "refused": EXIT_REFUSED,
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
    task: Optional[str] = typer.Argument(None, help="What the agent should do (with --resume: the next instruction)."),
    model: Optional[str] = typer.Option(
        None, "--model", "-m",
        help="provider/model: anthropic/…, openai/… (Responses API from gpt-5.6 on; openai-chat/… for Chat Completions), "
        "deepseek/…, gemini/…, openrouter/<vendor>/…, azure/<deployment>, bedrock/<model id>, vertex/…, "
        "openai-compat/<model>@<url>, local/<path or hub id>; "
        "or a short name: sonnet, opus, haiku, gpt, deepseek, gemini (`hitrate prices` shows what they are). "
        "Default: the resumed session's model; else $HITRATE_MODEL, the config file, the first provider with a key, "
        "else a small local model.",
    ),
    workspace: Optional[Path] = typer.Option(
        None, "--workspace", "-w",
        help="The project the agent works in (file tools stay inside it, and the sandboxed shell can write only there: docs/security.md). Default: the resumed session's, else the current folder.",
    ),
    resume: Optional[str] = typer.Option(
        None, "--resume",
        help="Continue this session (its id from `hitrate ledger`, or the id's first characters): its transcript, "
        "cache key and totals carry on. Without an id: list recent sessions to pick one.",
    ),
    max_steps: int = typer.Option(50, "--max-steps", min=1, help="Most model calls."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", min=0, help="Stop before a call once this many USD are spent."),
    max_wall: Optional[float] = typer.Option(
        None, "--max-wall", min=0.001, help="Stop after this many seconds: no call starts, and none (nor its retries) runs, past it."
    ),
    max_output_tokens: Optional[int] = typer.Option(
        None, "--max-output-tokens", min=1, help="max_tokens of each call (thinking included). Default: 32,000 on models "
        "that think by default, else 4,096, within the model's own output limit.",
    ),
    effort: Optional[str] = typer.Option(
        None, "--effort", help="Reasoning effort: low, medium, high or max, sent as each backend's own parameter "
        "(Anthropic output_config.effort, OpenAI reasoning_effort / reasoning.effort, ...). Default: the config file's "
        "`effort`, else the model's own default.",
    ),
    connect_timeout: Optional[float] = typer.Option(
        None, "--connect-timeout", min=0.001, help="Seconds to reach the model server (default: the config file's "
        "[timeouts] connect_s, else 10).",
    ),
    first_byte_timeout: Optional[float] = typer.Option(
        None, "--first-byte-timeout", min=0.001, help="Seconds from sending a request to the response headers "
        "(default: [timeouts] first_byte_s, else 120).",
    ),
    idle_timeout: Optional[float] = typer.Option(
        None, "--idle-timeout", min=0.001, help="Seconds of silence allowed between two chunks of a streamed reply "
        "(default: [timeouts] idle_s, else 300). Each call also ends at what is left of --max-wall.",
    ),
    context_window: Optional[int] = typer.Option(
        None, "--context-window", min=1, help="The model's input window in tokens (default: the config file's "
        "[compaction] context_window, else what a self-hosted server reports, else the price table's)."
    ),
    permissions: Optional[str] = typer.Option(
        None, "--permissions", help="allow, deny or ask for tool calls no rule matches (default: the config file's "
        "[permissions] default, else allow); a headless run refuses what it would have to ask about.",
    ),
    compact_at: Optional[float] = typer.Option(
        None, "--compact-at", min=0.05, max=1.0,
        help="Compact the history before a call past this share of the window (default: [compaction] at, else 0.8)."
    ),
    compaction: Optional[str] = typer.Option(
        None, "--compaction", help="client (hitrate's cache-aware summary), native (the provider's own where the route has it, "
        "else client) or off (default: [compaction] mode, else client)."
    ),
    clear_tool_results: Optional[bool] = typer.Option(
        None, "--clear-tool-results/--no-clear-tool-results",
        help="Stub old large tool results before compacting, when that pays (default: [compaction] clear_tool_results, else on)."
    ),
    tool_protocol: Optional[str] = typer.Option(
        None, "--tool-protocol", help="native (the API's function calling) or text (one fenced shell block per reply, "
        "its output the next turn: for models whose function calling is unreliable). Default: the "
        "per-model `tool_protocol` in the config file, else text for the packaged small models (hitrate models), "
        "native for the rest.",
    ),
    json_events: bool = typer.Option(False, "--json", help="Print one JSON event per line instead of text."),
    db: Optional[Path] = typer.Option(None, "--db", help="Ledger file (default: $HITRATE_DB or the user data dir)."),
    redact_secrets: Optional[bool] = typer.Option(
        None, "--redact-secrets/--no-redact-secrets",
        help="Store known secret shapes (API keys, private keys, passwords) in the ledger as [REDACTED:…]; what the "
        "model is sent is never changed. Default: on, unless $HITRATE_REDACT_SECRETS=0 or `redact_secrets = false` "
        "in the config file.",
    ),
    prices: Optional[Path] = typer.Option(
        None, "--prices", help="Price file (hitrate snapshot or LiteLLM JSON; default: $HITRATE_PRICES, the config file's "
        "`prices`, else the shipped prices)."
    ),
    allow_unpriced: bool = typer.Option(
        False, "--allow-unpriced", help="Run a cloud model hitrate has no price for (a new release) instead of stopping."
    ),
    refresh_docs: bool = typer.Option(
        False, "--refresh-docs", help="With --resume: build requests from the current AGENTS.md, system prompt and tools "
        "(a new cache epoch) instead of the ones the session recorded.",
    ),
    cache_ttl: Optional[str] = typer.Option(
        None, "--cache-ttl", help="5m or 1h: lifetime of the cache marks on routes with Anthropic's cache (a 1h write "
        "costs 2x input, a 5m one 1.25x; 1h pays when you pause longer than 5 minutes). Default: the config file's "
        "`cache_ttl`, else 5m.",
    ),
) -> None:
    """Run the agent on TASK in a workspace and account for every call.

    Streams the model's text and tool activity, then a summary: tokens read from cache, written,
    fresh and output, the hit ratio, cost, and why any call missed the cache. With --resume, TASK
    continues a recorded session and the summary counts all of its calls. Exit codes: 0 done, 1 a
    call failed, 2 bad model / key / workspace / session, 3 a limit stopped the agent, 4 the model refused, 130
    cancelled."""
    from hitrate.harness.agent import AgentLimits
    from hitrate.harness.call_timeouts import TimeoutConfigError, configured_timeouts
    from hitrate.harness.commands.models import default_model_or_offer
    from hitrate.harness.defaults import config_path
    from hitrate.harness.models import ModelSpecError, parse_model_spec
    from hitrate.harness.price_source import PriceSourceError, price_table
    from hitrate.harness.printer import JsonLinesPrinter, TerminalPrinter
    from hitrate.harness.resume import SessionNotResumable
    from hitrate.harness.transcript_log import StoredTranscriptError
    from hitrate.store.ledger import Ledger, default_ledger_path
    from hitrate.tools.confine import confinement_notice, hide_from_commands

    ledger_path = db or default_ledger_path()
    hide_from_commands(ledger_path, config_path())  # wherever --db, $HITRATE_DB or $HITRATE_CONFIG put them
    if resume == "":
        resume = _pick_session(ledger_path)
        if resume is None:
            raise typer.Exit(EXIT_OK)
    if task is None:
        if resume is not None and sys.stdin.isatty():
            task = typer.prompt("next instruction")
        else:
            _fail("give the task: hitrate run \"what the agent should do\"")
    stored_spec: str | None = None
    if resume is not None:
        resume, stored_spec, stored_workspace = _resumable(ledger_path, resume)
        if workspace is None and stored_workspace is not None:
            workspace = Path(stored_workspace)
    ws = _workspace(workspace or Path("."))
    try:
        timeouts = configured_timeouts(config_path(), connect_s=connect_timeout, first_byte_s=first_byte_timeout, idle_s=idle_timeout)
    except TimeoutConfigError as exc:
        _fail(str(exc))
    # An unusable --db fails now (LedgerError, reported by the CLI), not after a model has loaded.
    Ledger(ledger_path).close()
    try:
        table = price_table(prices)
    except PriceSourceError as exc:
        _fail(str(exc))
    try:
        spec_text = model or stored_spec or default_model_or_offer()
        spec = parse_model_spec(spec_text)
        if not allow_unpriced:
            check_known_model(spec, table)
    except ModelSpecError as exc:
        _fail(str(exc))
    if spec.wire == "local_engine":
        require_extra("local", f"the local model {spec.model}")
    sink: EventSink = JsonLinesPrinter() if json_events else TerminalPrinter()
    unconfined = confinement_notice()
    if unconfined is not None:
        typer.echo(f"warning: {unconfined}", err=True)
    approve = _permission_hook(permissions)
    level = chosen_effort_or_exit(effort)
    if cache_ttl not in (None, "5m", "1h"):
        _fail(f"--cache-ttl must be 5m or 1h, not {cache_ttl!r}")
    route = _resolve(spec_text, table, sink, json_events, cache_ttl)
    if max_cost is not None and table.find(route.model) is None:
        # Unpriced calls count as $0 towards the limit, so it would never fire.
        typer.echo(f"warning: cost limit cannot be enforced: {route.label} has no price", err=True)
    limits = AgentLimits(max_steps=max_steps, max_cost_usd=max_cost, max_wall_s=max_wall)
    try:
        result = run_task(route, ws, task, ledger_path=ledger_path, sink=sink, limits=limits,
                          config=session_config(max_output_tokens, context_window, compact_at, compaction, clear_tool_results,
                                                effort=level, timeouts=timeouts, tool_protocol=tool_protocol),
                          resume=resume, price_table=table, approve=approve, redact_secrets=redact_secrets,
                          refresh_head=refresh_docs)
    except (SessionNotResumable, StoredTranscriptError) as exc:
        _fail(str(exc))
    if unconfined is not None:
        typer.echo(f"warning: {unconfined}", err=True)  # again under the summary, where it is read
    raise typer.Exit(exit_code(result))


def exit_code(result: AgentResult) -> int:
    """The exit code for how the agent stopped. A call refused for a bad key (401/403) or a model
    the server does not have (404: Anthropic's `not_found_error`, OpenAI's `model_not_found`) is a
    usage error, as a bad model spec is: retrying the same command cannot help."""
    if result.status == "error" and (result.error_kind == "auth" or result.error_status == 404):
        return EXIT_USAGE
    return _EXIT_FOR_STATUS.get(result.status, EXIT_ERROR)


_CLOUD_PROVIDERS = ("anthropic", "openai", "openai-chat", "openai-responses", "deepseek", "gemini", "bedrock", "vertex")
# Routes whose models are another provider's, for the closest-name hint.
_PRICED_AS = {"openai-chat": "openai", "openai-responses": "openai", "bedrock": "anthropic", "vertex": "anthropic"}


def check_known_model(spec: ModelSpec, table: PriceTable) -> None:
    """Stop a cloud model name the price table does not know, most likely a typo, with the
    closest known names; it would otherwise run unpriced, uncounted towards --max-cost."""
    if spec.provider not in _CLOUD_PROVIDERS or table.find(spec.model) is not None:
        return
    import difflib

    from hitrate.harness.models import ModelSpecError

    provider = _PRICED_AS.get(spec.provider, spec.provider)
    names = sorted({n for m in table.models if m.provider == provider for n in (m.model, *m.aliases)})
    close = difflib.get_close_matches(spec.model.lower(), names, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(f'{spec.provider}/{c}' for c in close)}? " if close else ""
    raise ModelSpecError(
        f"unknown model {spec.label!r}: no price for it in snapshot {table.id}. {hint}"
        "(`hitrate prices` lists the known ones; --allow-unpriced runs it anyway, unpriced.)"
    )


def _resolve(spec_text: str, table: PriceTable, sink: EventSink, quiet: bool, cache_ttl: str | None = None) -> Route:
    """The route for the spec; a local model says it is loading first (a load takes a while)."""
    from hitrate.harness.models import ModelSpecError
    from hitrate.harness.router import Router

    if spec_text.startswith("local/") and not quiet:
        typer.echo(f"loading model {spec_text[len('local/'):]}…", err=True)
    try:
        return Router(price_table=table, cache_ttl=cache_ttl).resolve(spec_text)
    except ModelSpecError as exc:
        _fail(str(exc))


def _pick_session(ledger_path: Path) -> str | None:
    """`--resume` without an id: list recent sessions; on a terminal, ask which one."""
    from hitrate.harness.commands.format import console, money, percent
    from hitrate.harness.commands.sessions import recent_sessions, short_id_length
    from hitrate.harness.terminal_text import visible
    from hitrate.store.ledger import Ledger

    if not ledger_path.is_file():
        _fail(f"no sessions to resume: there is no ledger at {ledger_path}")
    with Ledger(ledger_path, read_only=True) as ledger:
        sessions = recent_sessions(ledger, limit=10)
    if not sessions:
        _fail(f"no sessions to resume in {ledger_path}")
    n = short_id_length([s.id for s in sessions])
    out = console(stderr=True)
    out.print("recent sessions, newest first:")
    for i, s in enumerate(sessions, start=1):
        t = s.summary.totals if s.summary else None
        when = s.started_at.strftime("%Y-%m-%d %H:%M") if s.started_at else "-"
        figures = f"{t.calls} calls, {percent(t.hit_ratio)} hit, {money(t.cost_usd)}" if t else ""
        out.print(visible(f"{i:>2}. {s.id[:n]}  {when}  {s.model or '-'}  {figures}"), overflow="ellipsis", no_wrap=True)
        if s.first_prompt:
            out.print(f"    {visible(s.first_prompt)}", overflow="ellipsis", no_wrap=True, style="dim")
    if not sys.stdin.isatty():
        out.print("continue one with: hitrate run --resume <id or its first characters> \"next instruction\"")
        return None
    answer = typer.prompt("resume which (number or id)", err=True).strip()
    if answer.isdigit() and 1 <= int(answer) <= len(sessions):
        return sessions[int(answer) - 1].id
    return answer


def _resumable(ledger_path: Path, session_id: str) -> tuple[str, str | None, str | None]:
    """(whole id, model spec, workspace) of the session to resume, given its id or a unique prefix
    of it; exits with a message if it cannot be resumed."""
    from hitrate.harness.commands.sessions import SessionLookupError, resolve_session
    from hitrate.harness.resume import SessionNotResumable, load_session
    from hitrate.harness.transcript_log import StoredTranscriptError
    from hitrate.store.ledger import Ledger

    if not ledger_path.is_file():
        _fail(f"no saved transcript for session {session_id}: there is no ledger at {ledger_path}")
    try:
        with Ledger(ledger_path) as ledger:
            try:
                session_id = resolve_session(ledger, session_id)
            except SessionLookupError:
                pass  # load_session names the id it cannot find
            stored = load_session(ledger, session_id)
    except (SessionNotResumable, StoredTranscriptError) as exc:
        _fail(str(exc))
    return session_id, stored.stored.model_spec or stored.record.model_spec, stored.record.workspace


def _permission_hook(flag: str | None) -> "ApprovalHook":
    """The config file's permission rules for a run nobody watches: what a rule allows runs, what
    it denies is refused with the rule named, and what would need asking is refused (--permissions
    sets the verdict for calls no rule matches; without it, the file's default, else allow)."""
    from hitrate.harness.defaults import config_path
    from hitrate.harness.permissions import PermissionRuleError, Permissions

    if flag not in (None, "allow", "deny", "ask"):
        _fail(f"--permissions must be allow, deny or ask, not {flag!r}")
    try:
        return Permissions.load(config_path(), default=flag, fallback="allow").hook(ask=None)  # type: ignore[arg-type]
    except PermissionRuleError as exc:
        _fail(str(exc))


def run_task(route: Route, workspace: Path, task: str, *, ledger_path: Path | None, sink: EventSink,
             limits: AgentLimits, config: SessionConfig, policy: Policy | None = None,
             resume: str | None = None, price_table: PriceTable | None = None,
             approve: ApprovalHook | None = None, redact_secrets: bool | None = None,
             refresh_head: bool = False) -> AgentResult:
    """Run one task to its end in a fresh session, or in session `resume` continued from the
    ledger (on the head it recorded, unless `refresh_head`); the route is closed afterwards.
    `redact_secrets` None: the ledger's default."""
    from hitrate.harness.agent import Agent
    from hitrate.harness.session import Session
    from hitrate.store.ledger import Ledger, default_ledger_path

    with Ledger(ledger_path or default_ledger_path(), redact_secrets=redact_secrets) as ledger:
        try:
            if resume is None:
                session = Session(route, workspace, ledger=ledger, sink=sink, config=config, price_table=price_table)
            else:
                session = Session.resume(ledger, resume, route, workspace, sink=sink, config=config, price_table=price_table,
                                         refresh_head=refresh_head)
                if session.head_notice is not None:
                    typer.echo(f"note: {session.head_notice}", err=True)
        except BaseException:
            route.close()
            raise
        if approve is not None:
            session.approve = approve
        try:
            return Agent(session, policy=policy, limits=limits).run(task)
        finally:
            session.close()


def lint_command(
    workspace: Path = typer.Option(Path("."), "--workspace", "-w", help="The project whose prompt to check."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Check against this model's caching rules."),
    task: str = typer.Option("(lint)", "--task", help="A stand-in first user message."),
    count_tokens: bool = typer.Option(
        False, "--count-tokens", help="Measure the prompt with the provider's token counter (Anthropic's count_tokens, "
        "on anthropic/ and vertex/; needs the key) instead of the bytes/4 estimate, so marks below the model's "
        "minimum cacheable length are found on real counts.",
    ),
) -> None:
    """Check the prompt hitrate would build for a workspace before sending it.

    Flags volatile text in the cached head, per-run values in tool schemas, tool order, cache marks
    below the model's minimum or over the provider's limit. Exits 1 on an error-level finding."""
    from hitrate.harness.commands.format import table_width
    from hitrate.harness.commands.lint import checked_line, report_lines, wrap
    from hitrate.harness.defaults import default_model
    from hitrate.harness.dynamic_context import workspace_context
    from hitrate.harness.models import ModelSpecError, parse_model_spec
    from hitrate.harness.router import rules_for
    from hitrate.harness.session import session_inputs
    from hitrate.projection.lint import lint
    from hitrate.projection.project import Projector, ProjectionError
    from hitrate.projection.transcript import TextBlock, Transcript, UserMessage

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
    context = workspace_context(ws)

    def build(counter=None):
        projector = Projector(rules) if counter is None else Projector(rules, token_counter=counter)
        return projector.project(model=spec.model, tools=inputs.tool_specs, system=inputs.system,
                                 transcript=transcript, docs=inputs.docs, context=context, rules=rules)  # fmt: skip

    try:
        prompt = build()
    except ProjectionError as exc:
        _fail(f"cannot build the prompt: {exc}")
    measured = "estimate"
    if count_tokens:
        measured, prompt = _counted(model, prompt, build)
    findings = lint(prompt, rules)
    width = table_width()
    out = wrap(f"lint for {spec.label}{note}: head {prompt.head_tokens:,} tokens ({measured}), "
               f"{len(prompt.breakpoints)} cache mark(s)", width)  # fmt: skip
    out.append(f"workspace: {ws}")  # never wrapped: a path is copied whole
    out += wrap(checked_line(prompt, rules, [d.path for d in inputs.docs], len(inputs.tool_specs)), width)
    out += report_lines(findings, rules, width) if findings else ["no findings: nothing in the cached head changes between runs."]
    typer.echo("\n".join(out))
    errors = sum(1 for f in findings if f.severity == "error")
    sys.stdout.flush()
    raise typer.Exit(1 if errors else 0)


def _counted(spec_text: str, prompt, build):
    """(how the tokens were measured, the prompt measured on the provider's count when it can
    count); the estimate, with the reason, when it cannot."""
    from hitrate.harness.models import ModelSpecError
    from hitrate.harness.router import Router
    from hitrate.harness.token_count import COUNTING_PROVIDERS, CountUnavailable, count_prompt_tokens, scaled_counter

    router = Router()
    try:
        spec = router.parse(spec_text)
        if spec.provider not in COUNTING_PROVIDERS:
            return f"estimate: {spec.label} cannot count tokens (only Anthropic's API and Vertex can)", prompt
        route = router.resolve(spec)
    except ModelSpecError as exc:
        return f"estimate: cannot count ({exc})", prompt
    try:
        real = count_prompt_tokens(route, prompt)
    except CountUnavailable as exc:
        return f"estimate: {exc}", prompt
    finally:
        route.close()
    return f"counted by the API: {real:,} in the whole prompt", build(scaled_counter(real, prompt.total_tokens))
