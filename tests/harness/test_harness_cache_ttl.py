"""`--cache-ttl 5m|1h` (and the config file's `cache_ttl`): the lifetime of every cache mark on
routes with Anthropic's cache, as the request sends it, as misses are explained and as the
keep-alive clock counts it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fake_llm_server import Reply

from hitrate.harness.keepalive import KeepAliveConfig, decide, warm_context
from hitrate.harness.models import ModelSpecError, parse_model_spec
from hitrate.harness.router import RouteError, Router, rules_for
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.policy import ModelPolicy

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
WRITE = {"input_tokens": 20, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 5}
READ = {"input_tokens": 20, "cache_creation_input_tokens": 40, "cache_read_input_tokens": 3000, "output_tokens": 5}


def test_rules_take_the_ttl_for_every_mark_and_refuse_other_caches():
    spec = parse_model_spec("anthropic/claude-sonnet-5", env={})
    rules, explain = rules_for(spec, cache_ttl="1h")
    assert (rules.head_ttl, rules.message_ttl) == ("1h", "1h") and explain == rules
    assert rules_for(spec)[0].head_ttl == "5m"
    local, local_explain = rules_for(parse_model_spec("local//models/tiny", env={}), cache_ttl="1h")
    assert local.message_ttl == "1h" and local_explain.family == "local"  # the engine pins for an hour
    with pytest.raises(RouteError, match="Anthropic's cache"):
        rules_for(parse_model_spec("openai/gpt-5.6", env={}), cache_ttl="1h")
    with pytest.raises(RouteError, match="5m or 1h"):
        rules_for(spec, cache_ttl="30m")


def test_config_file_key_applies_only_where_the_choice_exists(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('cache_ttl = "1h"\n')
    router = Router({"HITRATE_CONFIG": str(config)}, overrides={})
    assert router.rules(parse_model_spec("anthropic/claude-sonnet-5", env={}))[0].head_ttl == "1h"
    assert router.rules(parse_model_spec("openai/gpt-5.6", env={}))[0].head_ttl == "30m"  # no error: not its cache
    config.write_text('cache_ttl = "2h"\n')
    with pytest.raises(ModelSpecError, match="cache_ttl"):
        Router({"HITRATE_CONFIG": str(config)}, overrides={})


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def two_calls(fake_server, workspace, ledger, ttl: str, gap: timedelta, second=READ):
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    route = Router(env, overrides={}, cache_ttl=ttl).resolve("anthropic/claude-sonnet-5")
    clock = Clock()
    session = Session(route, workspace, ledger=ledger, context=lambda: {"date": "2026-12-01"}, clock=clock,
                      sleep=lambda s: None, config=SessionConfig(max_output_tokens=32))
    fake_server.push(Reply(text="one", usage=WRITE), Reply(text="two", usage=second))
    session.add_user_message("first")
    session.call(1, ModelPolicy())
    decision = decide(warm_context(session), T0 + timedelta(seconds=1), KeepAliveConfig(), session.price_table)
    clock.now = T0 + gap
    session.add_user_message("second")
    outcome = session.call(2, ModelPolicy())
    session.close()
    return fake_server.bodies("/messages"), outcome, decision


def test_one_hour_marks_are_sent_explained_and_kept_alive_by_their_own_clock(fake_server, workspace, ledger):
    bodies, outcome, decision = two_calls(fake_server, workspace, ledger, "1h", timedelta(minutes=10))
    marks = [b["cache_control"] for b in bodies[0]["system"] if "cache_control" in b]
    marks += [blk["cache_control"] for m in bodies[0]["messages"] for blk in m["content"] if "cache_control" in blk]
    assert marks and all(mark == {"type": "ephemeral", "ttl": "1h"} for mark in marks)
    # Ten minutes later the 1h entry is alive: a hit, not ttl_expired.
    assert outcome.explanation.reason == "hit" and outcome.record.miss_reason is None
    # The keep-alive clock counts the hour: the warm-up would be due at 54:00, not 4:30.
    assert decision.ttl_label == "1h"
    assert decision.expires_at == T0 + timedelta(hours=1)


@pytest.mark.parametrize(("ttl", "reason"), [("5m", "ttl_expired"), ("1h", "unknown")])
def test_a_miss_after_a_ten_minute_pause_is_explained_by_the_ttl_sent(fake_server, workspace, ledger, ttl, reason):
    """The provider reports no read after ten minutes: with 5m marks the entry had expired; with 1h
    marks it had not, so the miss has another cause."""
    bodies, outcome, decision = two_calls(fake_server, workspace, ledger, ttl, timedelta(minutes=10), second=WRITE)
    assert bodies[0]["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": ttl}
    assert outcome.explanation.reason == reason


def test_five_minute_keepalive_clock(fake_server, workspace, ledger):
    bodies, outcome, decision = two_calls(fake_server, workspace, ledger, "5m", timedelta(minutes=10))
    assert decision.ttl_label == "5m" and decision.expires_at == T0 + timedelta(minutes=5)


def test_run_flag(fake_server, workspace, tmp_path):
    import typer
    from typer.testing import CliRunner

    from hitrate.harness.commands import run as cli_run

    app = typer.Typer()
    cli_run.register(app)
    app.command("noop")(lambda: None)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "OPENAI_API_KEY": "k",
           "OPENAI_BASE_URL": fake_server.url + "/v1", "HITRATE_CONFIG": str(tmp_path / "none.toml")}
    base = ["run", "hi", "-w", str(workspace), "--db", str(tmp_path / "x.db")]
    fake_server.push(Reply(text="ok", usage=WRITE))
    result = CliRunner().invoke(app, [*base, "-m", "anthropic/claude-sonnet-5", "--cache-ttl", "1h"], env=env)
    assert result.exit_code == 0, result.output
    assert fake_server.bodies("/messages")[0]["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    result = CliRunner().invoke(app, [*base, "-m", "anthropic/claude-sonnet-5", "--cache-ttl", "2h"], env=env)
    assert result.exit_code == 2 and "--cache-ttl must be 5m or 1h" in result.output
    result = CliRunner().invoke(app, [*base, "-m", "openai/gpt-5.6", "--cache-ttl", "1h"], env=env)
    assert result.exit_code == 2 and "Anthropic's cache" in result.output
