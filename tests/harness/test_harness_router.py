"""Model specs to backends: rules by wire and price table, keys from the environment, clear errors,
and the default model when none is given."""

from __future__ import annotations

import socket

import pytest

from hitrate.harness.defaults import NoModelError, default_model
from hitrate.harness.models import ModelSpecError, parse_model_spec
from hitrate.harness.router import RouteError, Router, rules_for
from hitrate.harness.wire.anthropic import AnthropicBackend
from hitrate.harness.wire.openai_chat import OpenAIChatBackend


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.mark.parametrize(
    ("spec", "family", "minimum"),
    [
        ("anthropic/claude-sonnet-5", "anthropic", 1024),
        ("anthropic/claude-haiku-4-5", "anthropic", 4096),
        ("anthropic/some-future-model", "anthropic", 0),
        ("openai/gpt-5.6", "openai_breakpoints", 0),
        ("openai/gpt-5.4", "openai_implicit", 1024),
        ("deepseek/deepseek-flash", "deepseek", 0),
        ("gemini/gemini-2.5-flash", "gemini", 2048),
        ("openai-compat/qwen@http://127.0.0.1:8000/v1", "openai_compat", 0),
    ],
)
def test_rules_come_from_the_wire_and_the_price_table(spec, family, minimum):
    rules, explain = rules_for(parse_model_spec(spec, env={}))
    assert (rules.family, rules.min_cacheable_tokens) == (family, minimum)
    assert explain == rules


def test_local_plans_anthropic_marks_but_explains_as_a_prefix_cache():
    rules, explain = rules_for(parse_model_spec("local//models/tiny", env={}))
    assert rules.family == "anthropic" and rules.min_cacheable_tokens == 0
    assert explain.family == "local"


def test_resolve_picks_the_adapter_per_wire_and_honours_base_urls(fake_server):
    env = {"ANTHROPIC_API_KEY": "a", "ANTHROPIC_BASE_URL": fake_server.url,
           "OPENAI_API_KEY": "o", "OPENAI_BASE_URL": fake_server.url + "/v1"}
    router = Router(env)
    anthropic_route = router.resolve("anthropic/claude-sonnet-5")
    assert isinstance(anthropic_route.backend, AnthropicBackend)
    assert anthropic_route.backend.base_url == fake_server.url and anthropic_route.backend_name == "anthropic"
    openai_route = router.resolve("openai/gpt-5.4")
    assert isinstance(openai_route.backend, OpenAIChatBackend) and openai_route.backend.base_url == fake_server.url + "/v1"
    compat = router.resolve(f"openai-compat/qwen@{fake_server.url}/v1")
    assert compat.backend_name == "openai-compat" and compat.spec.quirks.usage_dialect == "openai_compat"
    for route in (anthropic_route, openai_route, compat):
        route.close()


def test_clear_errors():
    router = Router({})
    with pytest.raises(ModelSpecError, match="unknown provider 'mistral'"):
        router.resolve("mistral/large")
    with pytest.raises(ModelSpecError, match="set ANTHROPIC_API_KEY"):
        router.resolve("anthropic/claude-sonnet-5")
    with pytest.raises(ModelSpecError, match="no provider"):
        router.resolve("gpt-5")
    with pytest.raises(ModelSpecError, match="openai-compat/<model>@<base_url>"):
        router.resolve("openai-compat/qwen")
    with pytest.raises(RouteError, match="cannot reach http://127.0.0.1:.*is running"):
        router.resolve(f"openai-compat/qwen@http://127.0.0.1:{closed_port()}/v1")


def test_local_model_that_does_not_exist_is_a_clear_error(tmp_path):
    with pytest.raises(ModelSpecError, match="could not load model"):
        Router({}).resolve(f"local/{tmp_path / 'no-such-model'}")


def test_default_model_order(tmp_path):
    never = lambda *a: False  # noqa: E731
    config = tmp_path / "config.toml"
    env = {"HITRATE_CONFIG": str(config), "OPENAI_API_KEY": "o", "DEEPSEEK_API_KEY": "d",
           "HITRATE_MODELS_DIR": str(tmp_path / "models")}
    assert default_model(env, weights_cached=never) == "openai/gpt-5.6"
    config.write_text('model = "deepseek/deepseek-v4-pro"\n')
    assert default_model(env, weights_cached=never) == "deepseek/deepseek-v4-pro"
    assert default_model({**env, "HITRATE_MODEL": "anthropic/claude-opus-5"}, weights_cached=never) == "anthropic/claude-opus-5"
    config.write_text("model = [")
    with pytest.raises(ModelSpecError, match="not valid TOML"):
        default_model(env, weights_cached=never)


def test_default_falls_back_to_a_local_model_only_when_it_can_be_had(tmp_path):
    env = {"HITRATE_CONFIG": str(tmp_path / "none.toml"), "HITRATE_MODELS_DIR": str(tmp_path / "models")}
    assert default_model(env, weights_cached=lambda _: True).startswith("local/")
    with pytest.raises(NoModelError) as info:
        default_model(env, weights_cached=lambda _: False)
    message = str(info.value)
    assert "ANTHROPIC_API_KEY" in message and "HITRATE_MODEL" in message and "hitrate demo" in message
    assert "hitrate models install qwen2.5-coder-0.5b" in message
    assert str(tmp_path / "none.toml") in message


def test_gpt_5_5_gets_extended_retention_rules() -> None:
    from hitrate.harness.models import parse_model_spec
    from hitrate.harness.router import rules_for
    from hitrate.projection.caching import family_for

    rules, _ = rules_for(parse_model_spec("openai/gpt-5.5", env={"OPENAI_API_KEY": "k"}))
    assert (rules.family, rules.extended_retention, rules.implicit_ttl_seconds) == ("openai_implicit", True, 86400)
    assert "24 hours" in (family_for(rules).warming_blocked() or "")
    older, _ = rules_for(parse_model_spec("openai/gpt-5.4", env={"OPENAI_API_KEY": "k"}))
    assert (older.extended_retention, older.implicit_ttl_seconds, family_for(older).warming_blocked()) == (False, 300, None)
