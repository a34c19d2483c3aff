"""`hitrate lint --count-tokens`: the minimum cacheable length is checked on the provider's own
token count (Anthropic's count_tokens, here answered by the recording server), not on bytes / 4."""

from __future__ import annotations

import typer
from fake_gateways import FakeGatewayServer
from typer.testing import CliRunner

from hitrate.harness.commands import run as cli_run


def flat(text: str) -> str:
    return " ".join(text.split())


def lint_app() -> typer.Typer:
    app = typer.Typer()
    cli_run.register(app)
    return app


def test_marks_below_the_minimum_are_found_on_real_counts(workspace, tmp_path):
    server = FakeGatewayServer().start()
    try:
        env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.url, "HITRATE_CONFIG": str(tmp_path / "none.toml")}
        args = ["lint", "-w", str(workspace), "-m", "anthropic/claude-sonnet-5"]
        estimated = flat(CliRunner().invoke(lint_app(), args, env=env).output)
        assert "tokens (estimate), 2 cache mark(s)" in estimated and "no findings" in estimated
        assert server.requests == []  # the estimate sends nothing

        # The API counts far fewer tokens than bytes / 4 guessed: the head is below the minimum.
        server.counted_tokens = 700
        counted = flat(CliRunner().invoke(lint_app(), [*args, "--count-tokens"], env=env).output)
        assert "(counted by the API: 700 in the whole prompt), 0 cache mark(s)" in counted
        assert "head_below_min" in counted and "below the 1024-token minimum" in counted
        request = server.requests[-1]
        assert request.path == "/v1/messages/count_tokens"
        body = request.json()
        assert body["model"] == "claude-sonnet-5" and "max_tokens" not in body and body["system"] and body["tools"]
    finally:
        server.stop()


def test_backends_that_cannot_count_keep_the_estimate_and_say_why(workspace, tmp_path):
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "HITRATE_CONFIG": str(tmp_path / "none.toml")}
    result = flat(CliRunner().invoke(lint_app(), ["lint", "-w", str(workspace), "-m", "openai/gpt-5.4", "--count-tokens"],
                                     env=env).output)
    assert "(estimate: openai/gpt-5.4 cannot count tokens (only Anthropic's API and Vertex can))" in result
