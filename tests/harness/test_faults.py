"""Faults between the harness and a model server, each as "fault -> outcome".

Every test talks to a local server on 127.0.0.1 that misbehaves on purpose (`fake_llm_server`),
through the real `anthropic` / `openai` SDKs, and checks the ledger afterwards. The property every
one of them holds: each request the server received is exactly one ledger row, whatever failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from fake_llm_server import Broken, Failure, FakeLLMServer, Hang, Reply, StreamError
from typer.testing import CliRunner

from hitrate.harness.cli import _register_all, app

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.call_timeouts import TimeoutConfigError, configured_timeouts
from hitrate.harness.retry import RetryPolicy
from hitrate.harness.router import Router
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.wire.timeouts import CallTimeouts
from hitrate.store.ledger import Ledger
from hitrate.store.ledger_spool import spool_path
from hitrate.store.records import INTERRUPTED_CALL_ERROR

ANTHROPIC = ("anthropic/claude-sonnet-5", {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "{url}"})
CHAT = ("openai/gpt-5.5", {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "{url}/v1"})
RESPONSES = ("openai-responses/gpt-5.5", {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "{url}/v1"})
WIRES = {"anthropic": ANTHROPIC, "chat": CHAT, "responses": RESPONSES}


_register_all(app)
HITRATE = [sys.executable, "-c", "import sys; from hitrate.harness.cli import main; sys.argv[0] = 'hitrate'; main()"]


def fixed_context() -> dict[str, str]:
    return {"date": "2026-03-04", "workspace": "ws"}


def session_on(server: FakeLLMServer, wire: str, workspace: Path, ledger: Ledger, **config) -> Session:
    spec, env = WIRES[wire]
    route = Router(env={k: v.format(url=server.url) for k, v in env.items()}).resolve(spec)
    retry = config.pop("retry", RetryPolicy(max_attempts=3, base_delay_s=0))
    return Session(route, workspace, ledger=ledger, context=fixed_context, sleep=lambda s: None,
                   config=SessionConfig(retry=retry, **config))


def one_row_per_request(server: FakeLLMServer, ledger: Ledger) -> None:
    """The fault-injection property: the server's requests and the ledger's rows, one to one."""
    posts = [r for r in server.requests if r.path.endswith(("/messages", "/completions", "/responses"))]
    assert len(ledger.calls()) == len(posts), (len(ledger.calls()), len(posts))


def cli_env(server: FakeLLMServer) -> dict[str, str]:
    return {**os.environ, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.url, "NO_COLOR": "1"}


# ---- every attempt is a row ---------------------------------------------------------------------


@pytest.mark.parametrize("wire", list(WIRES))
def test_overloaded_then_5xx_then_answer_is_three_rows_linked_to_the_first(wire, fake_server, workspace, ledger):
    fake_server.push(
        Failure(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        Failure(500, {"error": {"type": "server_error", "message": "boom"}}),
        Reply(text="done"),
    )
    session = session_on(fake_server, wire, workspace, ledger)
    assert Agent(session).run("go").status == "end_turn"
    one_row_per_request(fake_server, ledger)
    first, second, served = ledger.calls(session_id=session.id)
    assert [r.attempt for r in (first, second, served)] == [1, 2, 3]
    assert first.retry_of is None and second.retry_of == served.retry_of == first.id
    assert first.error and second.error and served.error is None
    assert all(r.state == "done" for r in (first, second, served))
    # The failed attempts carry no usage of their own: the totals count the served call once.
    totals = ledger.totals(session_id=session.id)
    assert totals.calls == 3 and totals.failed_calls == 2 and totals.retries == 2
    assert totals.output == served.usage.output and totals.cost_usd == pytest.approx(served.cost_usd)


def test_ledger_command_shows_failed_attempts_and_retries(fake_server, workspace, tmp_path):
    fake_server.push(Failure(503, {"error": {"type": "api_error", "message": "unavailable"}}), Reply(text="ok"))
    db = tmp_path / "l.db"
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "COLUMNS": "200"}
    run = CliRunner().invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--db", str(db)], env=env)
    assert run.exit_code == 0, run.output
    shown = CliRunner().invoke(app, ["ledger", "--db", str(db)], env=env)
    assert shown.exit_code == 0, shown.output
    assert "2 (1✗) (1↻)" in shown.output and "n↻: retries" in shown.output
    with Ledger(db) as ledger:
        (session,) = ledger.sessions()
        failed, served = ledger.calls()
    listed = CliRunner().invoke(app, ["ledger", "--db", str(db), "--calls", session.id[:8]], env=env)
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    failed_line = next(line for line in lines if " failed " in line)
    served_line = next(line for line in lines if " ok " in line)
    assert " 1 " in failed_line and " 2 " in served_line
    assert any("unavailable" in line and failed.id[:4] in line for line in lines)
    as_json = CliRunner().invoke(app, ["ledger", "--db", str(db), "--calls", session.id, "--json"], env=env)
    rows = json.loads(as_json.output)
    assert [(r["attempt"], r["retry_of"], r["outcome"]) for r in rows] == [(1, None, "failed"), (2, failed.id, "ok")]
    assert rows[0]["usage"]["output"] is None and rows[1]["usage"]["output"] == served.usage.output


# ---- a row before the request, completed after ---------------------------------------------------


@pytest.mark.timeout(60)
def test_kill_9_during_a_call_leaves_the_row_marked_interrupted(fake_server, workspace, tmp_path):
    fake_server.push(Hang(30))
    db = tmp_path / "killed.db"
    proc = subprocess.Popen(
        [*HITRATE, "run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--db", str(db)],
        env=cli_env(fake_server), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    _kill_9_once(proc, lambda: bool(fake_server.requests), 30, "the run never sent its request")
    with Ledger(db) as ledger:
        (row,) = ledger.calls()
        assert row.state == "pending" and row.interrupted and row.error == INTERRUPTED_CALL_ERROR
        assert row.usage.prompt_tokens is None  # unknown, never 0
        totals = ledger.totals()
        assert totals.interrupted_calls == 1 and totals.failed_calls == 1
        one_row_per_request(fake_server, ledger)
    shown = CliRunner().invoke(app, ["ledger", "--db", str(db)], env={"COLUMNS": "200"})
    assert "1 (1✗) (1?)" in shown.output and "n?: calls never completed" in shown.output
    listed = CliRunner().invoke(app, ["ledger", "--db", str(db), "--calls", row.session_id], env={"COLUMNS": "200"})
    assert " interrupted " in listed.output and "the process ended before this call finished" in listed.output


class FillingDisk:
    """Makes the ledger file's disk full from the moment `fill` is called: SQLite may not grow the
    file past the pages it has (`PRAGMA max_page_count`, a per-connection limit, so a ledger opened
    later has room again). SQLite then refuses writes with "database or disk is full", as on a
    full disk."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def fill(self) -> None:
        with self.ledger.connection() as conn:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")


def test_disk_full_while_the_model_answers_spools_the_call_and_stops_with_a_clear_error(workspace, tmp_path):
    db = tmp_path / "full.db"
    ledger = Ledger(db)
    disk = FillingDisk(ledger)
    # The served call's usage payload is large enough that its row needs new pages.
    usage = {"input_tokens": 1200, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 9,
             "server_note": "x" * 6000}

    def answer(request):
        disk.fill()  # the disk fills up while the model is answering
        return Reply(text="the answer", usage=usage)

    server = FakeLLMServer(default=answer).start()
    try:
        session = session_on(server, "anthropic", workspace, ledger)
        result = Agent(session).run("go")
    finally:
        server.stop()
    assert result.status == "error"
    assert "database or disk is full" in result.detail and str(spool_path(db)) in result.detail
    # The summary still counts what the served call used.
    assert result.summary.totals.fresh_input == 1200 and result.summary.totals.output == 9
    ledger.close()
    assert spool_path(db).is_file()
    with Ledger(db) as reopened:  # room again: the spooled rows go in, the journal goes away
        (row,) = reopened.calls()
        assert row.state == "done" and row.error is None and row.usage.fresh_input == 1200 and row.cost_usd > 0
        assert reopened.spooled_rows == 0 and not spool_path(db).exists()
        kinds = [m.kind for m in reopened.messages(session.id)]
        assert kinds[:2] == ["user", "assistant"]


def test_disk_full_before_a_call_sends_nothing(fake_server, workspace, tmp_path):
    fake_server.push(Reply(text="never"))
    ledger = Ledger(tmp_path / "full.db")
    session = session_on(fake_server, "anthropic", workspace, ledger)
    FillingDisk(ledger).fill()
    result = Agent(session).run("go")
    assert result.status == "error" and "database or disk is full" in result.detail
    assert fake_server.requests == [] and ledger.calls() == []
    ledger.close()


# ---- streams that end early or carry garbage ----------------------------------------------------

# Events to leave out so the stream closes just before its last event: Anthropic's message_stop;
# on Chat the finish chunk, the usage chunk and [DONE]; Responses' response.completed.
CUT_BEFORE_END = {"anthropic": 1, "chat": 3, "responses": 1}
# A line that is not JSON, dressed as each wire's delta event (the Anthropic SDK skips unnamed events).
GARBAGE = {
    "anthropic": b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\"\n\n",
    "chat": b"data: {\"id\": \"chatcmpl-fake\", \"choices\": [{\"delta\": {\"content\": \"he\n\n",
    "responses": b"event: response.output_text.delta\ndata: {\"type\": \"response.output_text.delta\", \"delta\n\n",
}


def last_text(session: Session) -> str:
    message = session.transcript.messages[-1]
    return "".join(getattr(b, "text", "") for b in message.content)


@pytest.mark.parametrize("wire", list(WIRES))
def test_stream_that_ends_before_its_last_event_is_retried_not_taken_as_the_answer(wire, fake_server, workspace, ledger):
    fake_server.push(Broken(Reply(text="half an ans"), cut=CUT_BEFORE_END[wire]), Reply(text="the whole answer"))
    session = session_on(fake_server, wire, workspace, ledger)
    result = Agent(session).run("go")
    assert result.status == "end_turn" and last_text(session) == "the whole answer"
    one_row_per_request(fake_server, ledger)
    broken, served = ledger.calls()
    assert "the stream ended before" in broken.error and broken.usage.output is None and served.retry_of == broken.id


@pytest.mark.parametrize("wire", list(WIRES))
def test_stream_cut_short_on_the_last_attempt_fails_the_run_instead_of_answering(wire, fake_server, workspace, ledger):
    fake_server.push(Broken(Reply(text="half an ans"), cut=CUT_BEFORE_END[wire]))
    session = session_on(fake_server, wire, workspace, ledger, retry=RetryPolicy(max_attempts=1))
    result = Agent(session).run("go")
    assert result.status == "error" and result.error_kind == "broken_stream"
    assert "half an ans" not in last_text(session)
    one_row_per_request(fake_server, ledger)


@pytest.mark.parametrize("wire", list(WIRES))
def test_stream_line_that_is_not_json_is_a_retried_broken_call_with_its_row(wire, fake_server, workspace, ledger):
    fake_server.push(Broken(Reply(text="hello there"), garbage=GARBAGE[wire], at=3), Reply(text="clean"))
    session = session_on(fake_server, wire, workspace, ledger)
    result = Agent(session).run("go")
    assert result.status == "end_turn" and last_text(session) == "clean"
    one_row_per_request(fake_server, ledger)
    broken, _ = ledger.calls()
    assert "not JSON" in broken.error and broken.error.startswith("broken_stream")


def test_stream_line_that_is_not_json_prints_no_traceback(fake_server, workspace, tmp_path):
    fake_server.push(Broken(Reply(text="hello there"), garbage=GARBAGE["anthropic"], at=3), Reply(text="all good"))
    db = tmp_path / "l.db"
    result = subprocess.run([*HITRATE, "run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--db", str(db)],
                            env=cli_env(fake_server), capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "Traceback" not in out and "not JSON" in out and "all good" in out
    with Ledger(db) as ledger:
        one_row_per_request(fake_server, ledger)
        assert len(ledger.calls()) == 2


# ---- errors sent inside a stream that began with 200 ---------------------------------------------


@pytest.mark.parametrize(("wire", "fault"), [
    ("anthropic", StreamError("overloaded_error")),           # event: error, as Anthropic sheds load
    ("chat", StreamError("server_error")),                    # data: {"error": {"type": "server_error"}}
    ("responses", StreamError("server_error")),               # an `error` event
    ("responses", StreamError("server_error", failed=True)),  # response.failed
])
def test_in_stream_server_error_is_retried(wire, fault, fake_server, workspace, ledger):
    fake_server.push(fault, Reply(text="recovered"))
    session = session_on(fake_server, wire, workspace, ledger)
    result = Agent(session).run("go")
    assert result.status == "end_turn" and last_text(session) == "recovered"
    one_row_per_request(fake_server, ledger)
    failed, _ = ledger.calls()
    assert failed.error.startswith(("overloaded", "server_error"))


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_in_stream_invalid_request_error_is_not_retried(wire, fake_server, workspace, ledger):
    fake_server.push(StreamError("invalid_request_error"), Reply(text="never"))
    session = session_on(fake_server, wire, workspace, ledger)
    result = Agent(session).run("go")
    assert result.status == "error"
    one_row_per_request(fake_server, ledger)
    assert len(ledger.calls()) == 1


# ---- explicit timeouts, bounded by what is left of --max-wall ------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wire", list(WIRES))
def test_server_that_never_sends_headers_ends_the_run_at_max_wall(wire, fake_server, workspace, ledger):
    fake_server.push(*[Hang(60)] * 6)
    session = session_on(fake_server, wire, workspace, ledger, retry=RetryPolicy())  # 6 attempts, 120 s each
    began = time.monotonic()
    result = Agent(session, limits=AgentLimits(max_wall_s=2.0)).run("go")
    took = time.monotonic() - began
    assert result.status == "max_wall" and "wall-time limit" in result.detail
    assert took < 6, f"took {took:.1f}s"
    one_row_per_request(fake_server, ledger)
    assert all(r.error and r.state == "done" for r in ledger.calls())


@pytest.mark.timeout(60)
def test_silent_server_stops_each_attempt_at_the_first_byte_timeout(fake_server, workspace, ledger):
    fake_server.push(Hang(60), Hang(60))
    session = session_on(fake_server, "chat", workspace, ledger, retry=RetryPolicy(max_attempts=2, base_delay_s=0),
                         timeouts=CallTimeouts(first_byte_s=0.5))
    began = time.monotonic()
    result = Agent(session).run("go")
    assert result.status == "error" and result.error_kind == "timeout" and time.monotonic() - began < 8
    one_row_per_request(fake_server, ledger)
    assert ["first-byte timeout" in r.error for r in ledger.calls()] == [True, True]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wire", list(WIRES))
def test_stream_that_goes_silent_is_stopped_at_the_idle_timeout_and_retried(wire, fake_server, workspace, ledger):
    fake_server.push(Broken(Reply(text="a slow answer"), stall_after=2, stall_s=30), Reply(text="a quick answer"))
    session = session_on(fake_server, wire, workspace, ledger, timeouts=CallTimeouts(idle_s=0.5))
    began = time.monotonic()
    result = Agent(session).run("go")
    assert result.status == "end_turn" and last_text(session) == "a quick answer" and time.monotonic() - began < 10
    one_row_per_request(fake_server, ledger)
    stalled, _ = ledger.calls()
    assert "idle timeout" in stalled.error


@pytest.mark.timeout(60)
def test_stream_that_trickles_past_max_wall_is_cut_at_the_deadline(fake_server, workspace, ledger):
    fake_server.push(Broken(Reply(text="a very slow answer"), stall_after=3, stall_s=30))
    session = session_on(fake_server, "anthropic", workspace, ledger)  # idle timeout 300 s
    began = time.monotonic()
    result = Agent(session, limits=AgentLimits(max_wall_s=1.5)).run("go")
    assert result.status == "max_wall" and time.monotonic() - began < 5
    (row,) = ledger.calls()
    assert "wall-time limit" in row.error


@pytest.mark.timeout(90)
def test_run_against_a_server_that_never_answers_exits_as_a_limit_within_max_wall(fake_server, workspace, tmp_path):
    fake_server.push(*[Hang(60)] * 6)
    db = tmp_path / "l.db"
    began = time.monotonic()
    result = subprocess.run([*HITRATE, "run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--db", str(db),
                             "--max-wall", "3"], env=cli_env(fake_server), capture_output=True, text=True, timeout=60)
    took = time.monotonic() - began
    assert result.returncode == 3, result.stdout + result.stderr  # a limit stopped the agent
    assert "wall-time limit" in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert took < 20, f"took {took:.1f}s"
    with Ledger(db) as ledger:
        one_row_per_request(fake_server, ledger)


def test_timeouts_come_from_flags_then_the_config_file_then_defaults(tmp_path):
    config = tmp_path / "config.toml"
    assert configured_timeouts(config) == CallTimeouts()
    config.write_text("[timeouts]\nconnect_s = 3\nidle_s = 60\n")
    assert configured_timeouts(config, idle_s=5.0, first_byte_s=None) == CallTimeouts(connect_s=3, idle_s=5)
    config.write_text("[timeouts]\nidle = 60\n")
    with pytest.raises(TimeoutConfigError, match="known keys: connect_s, first_byte_s, idle_s"):
        configured_timeouts(config)
    config.write_text("[timeouts]\nidle_s = 0\n")
    with pytest.raises(TimeoutConfigError, match="idle_s"):
        configured_timeouts(config)


def test_a_bad_timeout_in_the_config_file_is_a_usage_error(fake_server, workspace, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[timeouts]\nfirst_byte_s = \"soon\"\n")
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "HITRATE_CONFIG": str(config)}
    result = CliRunner().invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--db", str(tmp_path / "l.db")], env=env)
    assert result.exit_code == 2 and "first_byte_s" in result.output and fake_server.requests == []


# ---- resume after a kill -9 in the middle of a tool ----------------------------------------------


@pytest.mark.timeout(90)
def test_kill_9_while_a_tool_runs_then_resume_answers_the_call_as_interrupted_and_goes_on(fake_server, workspace, tmp_path):
    fake_server.push(Reply(text="Running it.", tool_calls=[("toolu_1", "shell", '{"command": "touch started; sleep 30"}')]))
    db = tmp_path / "l.db"
    proc = subprocess.Popen([*HITRATE, "run", "build it", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--db", str(db)],
                            env=cli_env(fake_server), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _kill_9_once(proc, (workspace / "started").exists, 40, "tool never ran")
    with Ledger(db) as ledger:
        (stored,) = ledger.sessions()
        assert [m.kind for m in ledger.messages(stored.id)][-1] == "assistant"  # the tool call, unanswered
    fake_server.push(Reply(text="Picked up where it stopped."))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    resumed = CliRunner().invoke(app, ["run", "--resume", stored.id, "carry on", "--db", str(db)], env=env)
    assert resumed.exit_code == 0, resumed.output
    assert "Picked up where it stopped." in resumed.output
    sent = fake_server.bodies("/messages")[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    result, text = sent[-1]["content"][:2]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1" and result["is_error"] is True
    assert result["content"].startswith("interrupted:") and text["text"] == "carry on"
    with Ledger(db) as ledger:
        one_row_per_request(fake_server, ledger)


# ---- the property, over random sequences of faults -----------------------------------------------

FAULTS = {
    "500": lambda wire: Failure(500, {"error": {"type": "server_error", "message": "boom"}}),
    "529": lambda wire: Failure(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    "429": lambda wire: Failure(429, {"error": {"type": "rate_limit_error", "message": "slow down"}}, {"retry-after": "0"}),
    "400": lambda wire: Failure(400, {"error": {"type": "invalid_request_error", "message": "no"}}),
    "cut": lambda wire: Broken(Reply(text="half an ans"), cut=CUT_BEFORE_END[wire]),
    "garbage": lambda wire: Broken(Reply(text="hello there"), garbage=GARBAGE[wire], at=3),
    "in-stream": lambda wire: StreamError("overloaded_error" if wire == "anthropic" else "server_error"),
    "answer": lambda wire: Reply(text="fine"),
    "tool": lambda wire: Reply(tool_calls=[("call_1", "list_dir", "{}")]),
}


@pytest.mark.timeout(300)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(wire=st.sampled_from(list(WIRES)), faults=st.lists(st.sampled_from(list(FAULTS)), min_size=1, max_size=8))
def test_whatever_fails_every_request_is_exactly_one_row(wire, faults, workspace, tmp_path_factory):
    server = FakeLLMServer(default=lambda request: Failure(500, {"error": {"type": "server_error", "message": "script exhausted"}}))
    server.start()
    server.push(*(FAULTS[name](wire) for name in faults))
    try:
        with Ledger(tmp_path_factory.mktemp("prop") / "l.db") as ledger:
            session = session_on(server, wire, workspace, ledger)
            result = Agent(session, limits=AgentLimits(max_steps=4)).run("go")
            assert result.status in ("end_turn", "max_steps", "error")
            one_row_per_request(server, ledger)
            rows = ledger.calls()
            assert all(r.state == "done" for r in rows)
            # Retries name the first attempt of their call; a row with an error has no usage.
            ids = {r.id: r for r in rows}
            assert all(r.retry_of is None or (r.retry_of in ids and ids[r.retry_of].attempt == 1) for r in rows)
            assert all(r.usage.output is None for r in rows if r.error)
            assert len(result.summary.model_dump()) and result.summary.failed_calls == sum(1 for r in rows if r.error)
    finally:
        server.stop()


def test_server_that_went_away_is_a_row_per_attempt(workspace, ledger):
    server = FakeLLMServer().start()
    spec, env = ANTHROPIC
    route = Router(env={k: v.format(url=server.url) for k, v in env.items()}).resolve(spec)
    server.stop()  # the server goes away after the run started: connections are refused
    session = Session(route, workspace, ledger=ledger, context=fixed_context, sleep=lambda s: None,
                      config=SessionConfig(retry=RetryPolicy(max_attempts=3, base_delay_s=0)))
    result = Agent(session).run("go")
    assert result.status == "error" and result.error_kind == "connection"
    rows = ledger.calls()
    # No request reached a server, but three were attempted: three rows, each saying why.
    assert [r.attempt for r in rows] == [1, 2, 3] and all("could not reach the server" in r.error for r in rows)


def _kill_9_once(proc: subprocess.Popen, ready, timeout_s: float, never: str) -> None:
    """SIGKILL `proc` as soon as `ready()` holds (within `timeout_s`); fails with `never` (and
    the process's stderr when it exited on its own) if it never does."""
    try:
        deadline = time.monotonic() + timeout_s
        while not ready() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert ready(), f"{never}: {proc.stderr.read().decode() if proc.poll() is not None else ''}"
        proc.kill()  # SIGKILL
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
