"""The text tool protocol (`--tool-protocol text`): one fenced shell block per reply, run by the
sandboxed shell tool, its output the next user turn; requests carry no tools; history stays
append-only; format errors and the finish command."""

from __future__ import annotations

import json

import pytest
from scripted_model import scripted_route

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList, HarnessTurn, ToolCallFinished, ToolCallStarted
from hitrate.harness.model_overrides import apply_override, parse_overrides
from hitrate.harness.models import ModelSpecError, parse_model_spec
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.text_protocol import FINISH_COMMAND, parse_reply, shell_blocks
from hitrate.projection.transcript import TextBlock, UserMessage

FIX_COMMAND = "sed -i 's/a - b/a + b/' calc.py"


def make_session(route, workspace, ledger, sink, **config) -> Session:
    return Session(route, workspace, ledger=ledger, sink=sink, context=lambda: {"date": "2026-01-02"},
                   config=SessionConfig(tool_protocol="text", **config), sleep=lambda s: None)


def block(command: str, thought: str = "Next.") -> str:
    return f"{thought}\n```bash\n{command}\n```\n"


def test_commands_run_and_their_output_is_the_next_user_turn(workspace, ledger):
    route = scripted_route([
        {"text": block("cat calc.py", "Let me look.")},
        {"text": block(FIX_COMMAND)},
        {"text": block("python3 -c 'import calc; print(calc.add(2, 3))'")},
        {"text": block(FINISH_COMMAND, "Done.")},
    ])
    events = EventList()
    session = make_session(route, workspace, ledger, events)
    result = Agent(session).run("Fix add in calc.py")

    assert result.status == "end_turn" and result.detail == "the model submitted its work" and result.steps == 4
    assert (workspace / "calc.py").read_text().endswith("return a + b\n")
    prompts = route.backend.prompts
    assert all(p.tools == () for p in prompts)  # no tools field on the wire
    assert FINISH_COMMAND in prompts[0].system and "exactly one fenced block" in prompts[0].system
    # The output of the first command is the second request's last user turn.
    last = prompts[1].messages[-1]
    assert isinstance(last, UserMessage)
    text = "".join(b.text for b in last.content if type(b) is TextBlock)
    assert text.startswith("<output>\n") and "return a - b" in text and "[exit code 0]" in text
    assert "5" in "".join(b.text for b in prompts[3].messages[-1].content if type(b) is TextBlock)
    # Append-only: each request starts with the bytes of the one before, up to its tail.
    for earlier, later in zip(prompts, prompts[1:]):
        hashes = [s.hash for s in earlier.sections if s.kind != "tail"]
        assert [s.hash for s in later.sections][: len(hashes)] == hashes
    assert [e.name for e in events.of(ToolCallStarted)] == ["shell"] * 3
    assert json.loads(events.of(ToolCallStarted)[1].arguments) == {"command": FIX_COMMAND}
    assert not any(e.is_error for e in events.of(ToolCallFinished))
    assert len(ledger.calls(session_id=session.id)) == 4


def test_a_reply_without_a_block_gets_a_format_error_turn_then_a_second_ends_the_run(workspace, ledger):
    route = scripted_route([
        {"text": "I think the bug is in add."},
        {"text": block("ls")},
        {"text": "```bash\nls\n```\n```bash\ncat calc.py\n```"},
        {"text": "It is fixed now."},
    ])
    events = EventList()
    result = Agent(make_session(route, workspace, ledger, events)).run("Fix add")

    turns = events.of(HarnessTurn)
    assert [t.kind for t in turns] == ["format_error", "format_error"]
    assert turns[0].reason == "your reply has no ```bash block"
    assert turns[1].reason == "your reply has 2 ```bash blocks; send exactly one"
    assert "Nothing was run" in turns[0].text and FINISH_COMMAND in turns[0].text
    assert result.status == "end_turn"
    assert result.detail == "the model ended its turn (your reply has no ```bash block, again after a format-error turn)"
    assert result.harness_turns == {"format_error": 2}
    assert len(events.of(ToolCallStarted)) == 1


def test_a_json_call_under_the_text_protocol_is_told_how_commands_run(workspace, ledger):
    route = scripted_route([{"text": '{"name": "shell", "arguments": {"command": "ls"}}'}, {"text": block(FINISH_COMMAND)}])
    events = EventList()
    Agent(make_session(route, workspace, ledger, events)).run("List files")
    [turn] = events.of(HarnessTurn)
    assert "a call of `shell` written as text" in turn.reason


def test_the_same_failing_command_gets_a_nudge(workspace, ledger):
    route = scripted_route([{"text": block("exit 4")}, {"text": block("exit 4")}, {"text": block(FINISH_COMMAND)}])
    events = EventList()
    result = Agent(make_session(route, workspace, ledger, events)).run("Run")
    assert result.harness_turns == {"nudge": 1}
    last = route.backend.prompts[2].messages[-1]
    texts = [b.text for b in last.content if type(b) is TextBlock]
    assert texts[0].startswith("<output>") and "failed the same way 2 times" in texts[1]


def test_the_limit_stops_a_text_protocol_run(workspace, ledger):
    route = scripted_route([{"text": block("ls")}, {"text": block("ls")}])
    result = Agent(make_session(route, workspace, ledger, EventList()), limits=AgentLimits(max_steps=2)).run("Loop")
    assert result.status == "max_steps"


@pytest.mark.parametrize(
    "text, kind",
    [
        ("x\n```bash\nls -la\n```", "command"),
        ("```sh\nls\n```", "command"),
        (f"```bash\n{FINISH_COMMAND}\n```", "finish"),
        ("```python\nprint(1)\n```", "format_error"),
        ("```bash\n\n```", "format_error"),
    ],
)
def test_reply_parsing(text, kind):
    assert parse_reply(text).kind == kind


def test_shell_blocks_keep_heredocs_whole():
    command = "cat <<'EOF' > a.py\nx = 1\nEOF"
    assert shell_blocks(f"Write it.\n```bash\n{command}\n```") == [command]


def test_the_protocol_is_settable_per_model_in_the_config_file():
    spec = parse_model_spec("openai-compat/qwen@http://127.0.0.1:8080/v1", env={})
    overrides = parse_overrides({"models": {spec.label: {"tool_protocol": "text"}}}, "config")
    assert apply_override(spec, overrides).quirks.tool_protocol == "text"
    with pytest.raises(ModelSpecError, match="tool_protocol"):
        parse_overrides({"models": {spec.label: {"tool_protocol": "xml"}}}, "config")


def test_the_session_takes_the_models_protocol_unless_the_config_names_one(workspace, ledger):
    route = scripted_route([])
    route = route.__class__(spec=route.spec.model_copy(update={"quirks": route.spec.quirks.model_copy(update={"tool_protocol": "text"})}),
                            backend=route.backend, rules=route.rules, explain_rules=route.explain_rules)
    session = Session(route, workspace, ledger=ledger)
    assert session.tool_protocol == "text" and session.inputs.tool_specs == []
    native = Session(route, workspace, ledger=ledger, config=SessionConfig(tool_protocol="native"))
    assert native.tool_protocol == "native" and native.inputs.tool_specs


def test_a_resumed_text_protocol_session_goes_on_in_the_text_protocol(workspace, ledger):
    first = scripted_route([{"text": block("ls")}, {"text": block(FINISH_COMMAND)}])
    session = make_session(first, workspace, ledger, EventList())
    Agent(session).run("List")
    again = scripted_route([{"text": block("cat calc.py")}, {"text": block(FINISH_COMMAND)}])
    resumed = Session.resume(ledger, session.id, again, workspace, sleep=lambda s: None)  # no protocol named
    assert resumed.tool_protocol == "text"
    result = Agent(resumed).run("Show calc.py")
    assert result.detail == "the model submitted its work"
    assert not again.backend.prompts[0].tools
    # Every request of the resumed session extends the last one of the first run.
    before = [s.hash for s in first.backend.prompts[-1].sections if s.kind != "tail"]
    assert [s.hash for s in again.backend.prompts[0].sections][: len(before)] == before


def test_real_replies_of_a_small_model_are_one_command_each():
    """A real Qwen2.5-Coder-0.5B session under the text protocol (tests/fixtures/model_outputs):
    every reply is read as one command, and the repeats draw nudges as they did live (3 in 8 calls)."""
    from pathlib import Path

    from hitrate.harness.repair import RepeatedFailures

    data = json.loads((Path(__file__).parents[1] / "fixtures/model_outputs/qwen2.5-coder-0.5b-text-protocol-session.json").read_text())
    actions = [parse_reply(text) for text in data["replies"]]
    assert len(actions) == 8 and all(a.kind == "command" for a in actions)
    watch = RepeatedFailures()
    nudges = [watch.observe("shell", json.dumps({"command": a.command}), "same error", True) for a in actions]
    assert sum(n is not None for n in nudges) == 3


def test_a_cut_off_reply_runs_a_block_that_closed_and_is_told_when_none_did(workspace, ledger):
    route = scripted_route([
        {"text": block("ls") + "Now I will explain at length why", "stop_reason": "max_tokens"},
        {"text": "Let me write it:\n```bash\ncat <<'EOF' > calc.py\ndef add(a, b):", "stop_reason": "max_tokens"},
        {"text": block(FINISH_COMMAND)},
    ])
    events = EventList()
    result = Agent(make_session(route, workspace, ledger, events)).run("Fix add")
    assert [e.name for e in events.of(ToolCallStarted)] == ["shell"]
    [turn] = events.of(HarnessTurn)
    assert turn.kind == "format_error" and "cut off at the output token limit" in turn.reason
    assert result.detail == "the model submitted its work"


def test_a_cut_off_reply_with_several_blocks_is_told_to_send_one(workspace, ledger):
    """A small model often writes block after block until the output limit: the format error says
    that, not that no block was complete."""
    route = scripted_route([
        {"text": block("ls") + block("cat calc.py") + block("pytest -q") + "Then", "stop_reason": "max_tokens"},
        {"text": block(FINISH_COMMAND)},
    ])
    events = EventList()
    Agent(make_session(route, workspace, ledger, events)).run("Fix add")
    [turn] = events.of(HarnessTurn)
    assert turn.kind == "format_error"
    assert "3 ```bash blocks" in turn.reason and "send exactly one" in turn.reason
    assert "before one complete" not in turn.reason
