"""What-if per context policy: a long generated session (several windows) replayed under each
policy with each provider's rules and prices. Without compaction it fails at the window; every
other policy finishes inside it; the cache-aware summary reads the history from the cache, the
naive one does not, and costs more."""

from __future__ import annotations

import pytest

from hitrate.evals.whatif.policies import POLICIES, SessionScript, compare_policies, script_from_transcript_entries
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, ContextBlock, TextBlock, ToolCallBlock, ToolResultBlock, UserMessage

WINDOW = 30_000
TOOLS = [ToolSpec(name=n, description=f"{n} tool. " * 40, input_schema={"type": "object"}) for n in ("read_file", "shell")]
SYSTEM = "You are a coding agent.\n" + "Follow the project's conventions.\n" * 300


def long_script(rounds: int = 45) -> SessionScript:
    pairs = []
    for i in range(rounds):
        call = ToolCallBlock(call_id=f"c{i}", name="read_file", arguments='{"path": "parser.py"}')
        pairs.append((AssistantMessage(content=(TextBlock(text=f"Step {i}."), call)),
                      UserMessage(content=(ToolResultBlock(call_id=f"c{i}", content=f"line {i}\n" * 1200),))))
    return SessionScript(tools=TOOLS, system=SYSTEM, docs=[], opening=UserMessage(content=(TextBlock(text="Fix the parser."),)),
                         rounds=pairs)


@pytest.fixture(scope="module")
def results():
    return {(r.policy, r.target.split("/")[0]): r
            for r in compare_policies(long_script(), ["anthropic/claude-sonnet-5", "openai/gpt-5.4"], window=WINDOW)}


def test_only_no_compaction_fails_at_the_window(results) -> None:
    for provider in ("anthropic", "openai"):
        assert not results[("none", provider)].completed
        for policy in POLICIES[1:]:
            r = results[(policy, provider)]
            assert r.completed, (policy, provider)
            assert r.peak_prompt_tokens <= WINDOW


def test_the_cache_aware_summary_reads_the_cache_and_costs_less(results) -> None:
    for provider in ("anthropic", "openai"):
        aware, naive = results[("cache-aware", provider)], results[("naive", provider)]
        assert aware.summary_read_share > 0.9 and naive.summary_read_share == 0
        assert aware.summary_cost_usd < 0.6 * naive.summary_cost_usd
        assert aware.cost_usd < naive.cost_usd
        assert aware.compactions == naive.compactions > 0


def test_clearing_replaces_most_compactions(results) -> None:
    for provider in ("anthropic", "openai"):
        clearing, aware = results[("clearing", provider)], results[("cache-aware", provider)]
        assert clearing.clearings > 0 and clearing.compactions < aware.compactions


def test_native_bills_its_compaction_as_uncached_input(results) -> None:
    native = results[("native", "anthropic")]
    assert native.compactions > 0 and native.summary_read_share == 0


def test_a_script_from_stored_messages_drops_context_blocks() -> None:
    call = ToolCallBlock(call_id="c1", name="shell", arguments="{}")
    messages = [
        UserMessage(content=(TextBlock(text="go"), ContextBlock(text="date: d", values=(("date", "d"),)))),
        AssistantMessage(content=(call,)),
        UserMessage(content=(ToolResultBlock(call_id="c1", content="ok"),)),
        AssistantMessage(content=(TextBlock(text="done"),)),
    ]
    script = script_from_transcript_entries(messages, tools=TOOLS, system="s", docs=[])
    assert script.opening == UserMessage(content=(TextBlock(text="go"),))
    assert len(script.rounds) == 1
    with pytest.raises(ValueError):
        compare_policies(script, ["gemini/x"], window=1000)


def test_the_whatif_command_replays_a_recorded_session_per_policy(tmp_path) -> None:
    import json as _json

    import typer
    from typer.testing import CliRunner

    from scripted_model import scripted_route

    from hitrate.evals.commands.whatif import register
    from hitrate.harness.agent import Agent, AgentLimits
    from hitrate.harness.events import EventList
    from hitrate.harness.session import Session, SessionConfig
    from hitrate.store.ledger import Ledger

    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "ledger.db"
    script = [{"tool_calls": [("shell", _json.dumps({"command": f"seq {i} 1500"}))]} for i in range(8)] + [{"text": "done"}]
    with Ledger(db) as ledger:
        session = Session(scripted_route(script), ws, ledger=ledger, sink=EventList(), context=lambda: {"date": "d"},
                          config=SessionConfig(compaction="off"), sleep=lambda s: None)
        assert Agent(session, limits=AgentLimits(max_steps=20, show_budget=False)).run("Count.").status == "end_turn"
    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    run = CliRunner().invoke(app, ["whatif", session.id, "--policies", "--as", "anthropic/claude-sonnet-5",
                                   "--context-window", "12000", "--db", str(db), "--json"], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    out = _json.loads(run.output)
    by_policy = {r["policy"]: r for r in out["results"]}
    assert set(by_policy) == set(POLICIES) and out["context_window"] == 12000
    assert not by_policy["none"]["completed"] and by_policy["cache-aware"]["completed"]
    table = CliRunner().invoke(app, ["whatif", session.id, "--policies", "--as", "anthropic/claude-sonnet-5",
                                     "--context-window", "12000", "--db", str(db)], env={"COLUMNS": "80"})
    assert table.exit_code == 0 and "cache-aware" in table.output and "summ. read" in table.output
    bad = CliRunner().invoke(app, ["whatif", "nope", "--policies", "--as", "anthropic/claude-sonnet-5", "--db", str(db)])
    assert bad.exit_code == 2 and "no session" in bad.output
