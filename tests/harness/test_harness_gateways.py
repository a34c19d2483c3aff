"""Routes through gateways and clouds, end to end: the router builds the route from the environment,
the real SDK client (openai for OpenRouter / Azure, the anthropic SDK's AnthropicBedrock /
AnthropicVertex for Claude on AWS / Google) talks HTTP to a recording server on 127.0.0.1, and a
two-step agent run lands in the ledger with each provider's usage read its own way.

Usage payloads are in each API's documented shape: OpenRouter's "usage accounting" block
(prompt_tokens_details.cached_tokens / cache_write_tokens, cost, cost_details), Anthropic's
usage on Bedrock and Vertex, OpenAI's on Azure."""

from __future__ import annotations

import base64
import json

import pytest
from fake_gateways import FakeGatewayServer, event_stream_frame
from fake_llm_server import Reply

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.model_overrides import QuirkOverride, apply_override, load_overrides
from hitrate.harness.models import ModelSpecError, parse_model_spec
from hitrate.harness.router import Router, rules_for
from hitrate.harness.session import Session, SessionConfig

READ = ("call_1", "read_file", '{"path": "calc.py"}')


@pytest.fixture
def gateway():
    server = FakeGatewayServer().start()
    yield server
    server.stop()


def fixed_context() -> dict[str, str]:
    return {"date": "2026-01-02", "workspace": "ws"}


def run_two_steps(router: Router, spec: str, workspace, ledger):
    route = router.resolve(spec)
    session = Session(route, workspace, ledger=ledger, context=fixed_context, sleep=lambda s: None,
                      config=SessionConfig(max_output_tokens=64))
    result = Agent(session, limits=AgentLimits(max_steps=4, show_budget=False)).run("Read calc.py")
    session.close()
    return result, ledger.calls(session_id=session.id)


# ------------------------------------------------------------------------------------------------
# OpenRouter
# ------------------------------------------------------------------------------------------------

OPENROUTER_USAGE_WRITE = {
    "prompt_tokens": 2400, "completion_tokens": 12, "total_tokens": 2412, "cost": 0.0121, "is_byok": False,
    "cost_details": {"upstream_inference_cost": None},
    "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 2300, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0},
}
OPENROUTER_USAGE_READ = {
    "prompt_tokens": 2460, "completion_tokens": 9, "total_tokens": 2469, "cost": 0.0012,
    "prompt_tokens_details": {"cached_tokens": 2300, "cache_write_tokens": 140},
    "completion_tokens_details": {"reasoning_tokens": 0},
}


def test_openrouter_claude_gets_cache_control_marks_session_id_and_its_usage(gateway, workspace, ledger):
    env = {"OPENROUTER_API_KEY": "or-key", "OPENROUTER_BASE_URL": gateway.url + "/api/v1"}
    gateway.push(Reply(tool_calls=[READ], usage=OPENROUTER_USAGE_WRITE), Reply(text="done", usage=OPENROUTER_USAGE_READ))
    result, rows = run_two_steps(Router(env, overrides={}), "openrouter/anthropic/claude-sonnet-5", workspace, ledger)
    assert result.status == "end_turn"

    first, second = gateway.bodies("/chat/completions")
    assert gateway.requests[0].headers["authorization"] == "Bearer or-key"
    assert first["model"] == "anthropic/claude-sonnet-5"
    assert "prompt_cache_key" not in first and first["max_tokens"] == 64
    # Anthropic's marks on content parts, where OpenRouter passes them through to Claude.
    marks = [p["cache_control"] for m in second["messages"] if isinstance(m["content"], list)
             for p in m["content"] if "cache_control" in p]
    assert marks and all(mark == {"type": "ephemeral", "ttl": "5m"} for mark in marks)
    assert any("cache_control" in p for p in second["messages"][0]["content"])  # the system head
    assert any(m["role"] == "tool" and "cache_control" in m["content"][-1] for m in second["messages"])

    # prompt_tokens includes both cached and written tokens; writes are Anthropic's 5m class.
    u1, u2 = rows[0].usage, rows[1].usage
    assert (u1.fresh_input, u1.cache_write_5m, u1.cache_read, u1.output) == (100, 2300, 0, 12)
    assert (u2.fresh_input, u2.cache_write_5m, u2.cache_read) == (20, 140, 2300)
    assert rows[1].raw_usage["cost"] == 0.0012  # OpenRouter's own charge stays in the raw row
    assert all(r.backend == "openrouter" and r.cost_usd is not None for r in rows)


def test_openrouter_other_vendors_cache_by_prefix_without_marks(gateway):
    rules, _ = rules_for(parse_model_spec("openrouter/deepseek/deepseek-flash", env={}))
    assert rules.family == "openai_compat"
    claude, _ = rules_for(parse_model_spec("openrouter/anthropic/claude-sonnet-5", env={}))
    assert (claude.family, claude.min_cacheable_tokens) == ("anthropic", 1024)
    with pytest.raises(ModelSpecError, match="vendor/model"):
        parse_model_spec("openrouter/claude-sonnet-5", env={})


# ------------------------------------------------------------------------------------------------
# Azure OpenAI
# ------------------------------------------------------------------------------------------------


def test_azure_keeps_openai_semantics_and_sends_the_api_key_header(gateway, workspace, ledger):
    env = {"AZURE_OPENAI_API_KEY": "az-key", "AZURE_OPENAI_ENDPOINT": gateway.url}
    usage = {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
             "prompt_tokens_details": {"cached_tokens": 1920, "cache_write_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 0}}
    gateway.push(Reply(tool_calls=[READ], usage=usage), Reply(text="done", usage=usage))
    result, rows = run_two_steps(Router(env, overrides={}), "azure/gpt-5.4", workspace, ledger)
    assert result.status == "end_turn"

    assert gateway.requests[0].path == "/openai/v1/chat/completions"
    assert gateway.requests[0].headers["api-key"] == "az-key"
    first = gateway.bodies("/chat/completions")[0]
    assert first["max_completion_tokens"] == 64 and "max_tokens" not in first
    assert first["prompt_cache_key"].startswith("hitrate-")
    assert (rows[0].usage.fresh_input, rows[0].usage.cache_read) == (86, 1920)
    assert rows[0].backend == "azure"


def test_azure_entra_token_is_a_bearer_and_missing_credentials_are_named(gateway):
    env = {"AZURE_OPENAI_AD_TOKEN": "entra", "AZURE_OPENAI_BASE_URL": gateway.url + "/openai/v1/"}
    gateway.push(Reply(text="hi"))
    route = Router(env, overrides={}).resolve("azure/my-deployment")
    from hitrate.projection.caching import CacheRules
    from hitrate.projection.project import project
    from hitrate.projection.transcript import TextBlock, Transcript, UserMessage

    prompt = project(rules=CacheRules(family="openai_implicit"), model="my-deployment", tools=[], system="s",
                     transcript=Transcript(messages=(UserMessage(content=(TextBlock(text="hi"),)),)))
    route.backend.call(prompt, max_tokens=8)
    route.close()
    assert gateway.requests[0].headers["authorization"] == "Bearer entra" and "api-key" not in gateway.requests[0].headers
    with pytest.raises(ModelSpecError, match="AZURE_OPENAI_API_KEY"):
        Router({"AZURE_OPENAI_ENDPOINT": gateway.url}, overrides={}).resolve("azure/x")
    with pytest.raises(ModelSpecError, match="AZURE_OPENAI_ENDPOINT"):
        parse_model_spec("azure/x", env={})


# ------------------------------------------------------------------------------------------------
# Claude on Bedrock and Vertex, through the anthropic SDK's own clients
# ------------------------------------------------------------------------------------------------

ANTHROPIC_USAGE_WRITE = {"input_tokens": 30, "cache_creation_input_tokens": 1500, "cache_read_input_tokens": 0,
                         "cache_creation": {"ephemeral_5m_input_tokens": 1500, "ephemeral_1h_input_tokens": 0},
                         "output_tokens": 20}
ANTHROPIC_USAGE_READ = {"input_tokens": 12, "cache_creation_input_tokens": 80, "cache_read_input_tokens": 1500,
                        "cache_creation": {"ephemeral_5m_input_tokens": 80, "ephemeral_1h_input_tokens": 0},
                        "output_tokens": 7}


def check_anthropic_run(gateway, result, rows, backend: str) -> list[dict]:
    assert result.status == "end_turn"
    bodies = [r.json() for r in gateway.requests]
    assert all("model" not in b and b["anthropic_version"] for b in bodies)  # the model is in the path
    marks = [blk["cache_control"] for b in bodies for blk in b["system"] if "cache_control" in blk]
    assert marks == [{"type": "ephemeral", "ttl": "5m"}] * 2
    u1, u2 = rows[0].usage, rows[1].usage
    assert (u1.fresh_input, u1.cache_write_5m, u1.cache_read, u1.output) == (30, 1500, 0, 20)
    assert (u2.fresh_input, u2.cache_write_5m, u2.cache_read, u2.output) == (12, 80, 1500, 7)
    assert all(r.backend == backend and r.cost_usd is not None for r in rows)  # priced as Claude
    return bodies


def test_bedrock_with_sigv4_signed_requests_and_event_stream_framing(gateway, workspace, ledger):
    model_id = "us.anthropic.claude-sonnet-5-v1:0"
    env = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
           "ANTHROPIC_BEDROCK_BASE_URL": gateway.url}
    gateway.push(Reply(tool_calls=[READ], usage=ANTHROPIC_USAGE_WRITE), Reply(text="done", usage=ANTHROPIC_USAGE_READ))
    router = Router(env, overrides={})
    rules, _ = rules_for(router.parse(f"bedrock/{model_id}"))
    assert (rules.family, rules.min_cacheable_tokens) == ("anthropic", 1024)  # Claude's minimum, from the id
    result, rows = run_two_steps(router, f"bedrock/{model_id}", workspace, ledger)
    check_anthropic_run(gateway, result, rows, "bedrock")
    request = gateway.requests[0]
    assert request.path == "/model/us.anthropic.claude-sonnet-5-v1:0/invoke-with-response-stream"
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-east-1/bedrock/aws4_request" in request.headers["authorization"]


def test_bedrock_api_key_is_a_bearer_and_credentials_are_required(gateway, workspace, ledger):
    env = {"AWS_REGION": "eu-west-1", "AWS_BEARER_TOKEN_BEDROCK": "bedrock-key", "ANTHROPIC_BEDROCK_BASE_URL": gateway.url}
    gateway.push(Reply(tool_calls=[READ], usage=ANTHROPIC_USAGE_WRITE), Reply(text="done", usage=ANTHROPIC_USAGE_READ))
    result, rows = run_two_steps(Router(env, overrides={}), "bedrock/anthropic.claude-sonnet-5-v1:0", workspace, ledger)
    check_anthropic_run(gateway, result, rows, "bedrock")
    assert gateway.requests[0].headers["authorization"] == "Bearer bedrock-key"
    with pytest.raises(ModelSpecError, match="AWS_REGION"):
        parse_model_spec("bedrock/anthropic.claude-sonnet-5-v1:0", env={})
    with pytest.raises(ModelSpecError, match="AWS credentials"):
        Router({"AWS_REGION": "us-east-1"}, overrides={}, preflight=False).resolve("bedrock/anthropic.claude-sonnet-5-v1:0")


def test_event_stream_frames_decode_with_botocore():
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    payload = json.dumps({"bytes": base64.b64encode(b'{"type":"ping"}').decode()}).encode()
    buffer.add_data(event_stream_frame(payload, {":event-type": "chunk", ":message-type": "event"}))
    (message,) = list(buffer)
    assert message.headers[":event-type"] == "chunk" and json.loads(message.payload) == json.loads(payload)


def test_vertex_with_an_access_token(gateway, workspace, ledger):
    env = {"CLOUD_ML_REGION": "us-east5", "ANTHROPIC_VERTEX_PROJECT_ID": "proj-1", "VERTEX_ACCESS_TOKEN": "ya29.token",
           "ANTHROPIC_VERTEX_BASE_URL": gateway.url + "/v1"}
    gateway.push(Reply(tool_calls=[READ], usage=ANTHROPIC_USAGE_WRITE), Reply(text="done", usage=ANTHROPIC_USAGE_READ))
    result, rows = run_two_steps(Router(env, overrides={}), "vertex/claude-sonnet-5@20260101", workspace, ledger)
    check_anthropic_run(gateway, result, rows, "vertex")
    request = gateway.requests[0]
    assert request.path == "/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/claude-sonnet-5@20260101:streamRawPredict"
    assert request.headers["authorization"] == "Bearer ya29.token"
    with pytest.raises(ModelSpecError, match="CLOUD_ML_REGION"):
        parse_model_spec("vertex/claude-sonnet-5", env={})


# ------------------------------------------------------------------------------------------------
# Per-model overrides
# ------------------------------------------------------------------------------------------------


def test_config_file_overrides_quirks_for_a_gateway_that_differs(tmp_path, gateway):
    config = tmp_path / "config.toml"
    config.write_text(
        '[models."openai/qwen3-coder"]\nusage_dialect = "openai_compat"\nsend_prompt_cache_key = false\n'
        'max_tokens_field = "max_tokens"\n\n'
        f'[models."openai-compat/claude-sonnet-5@{gateway.url}/v1"]\ncache_family = "anthropic"\n'
    )
    env = {"HITRATE_CONFIG": str(config), "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": gateway.url + "/v1"}
    router = Router(env)
    spec = router.parse("openai/qwen3-coder")
    assert (spec.quirks.usage_dialect, spec.quirks.send_prompt_cache_key, spec.quirks.max_tokens_field) == (
        "openai_compat", False, "max_tokens")
    assert router.parse("openai/gpt-5.6").quirks.send_prompt_cache_key  # untouched
    proxied = router.parse(f"openai-compat/claude-sonnet-5@{gateway.url}/v1")
    assert rules_for(proxied)[0].family == "anthropic"

    config.write_text('[models."openai/x"]\nmax_tokens_feild = "max_tokens"\n')
    with pytest.raises(ModelSpecError, match=r'\[models."openai/x"\]: max_tokens_feild'):
        load_overrides(env)
    assert apply_override(spec, {"openai/qwen3-coder": QuirkOverride()}) == spec


# ------------------------------------------------------------------------------------------------
# openai/ behind a gateway keeps OpenAI's semantics
# ------------------------------------------------------------------------------------------------


def test_openai_chat_behind_any_base_url_keeps_openai_semantics(gateway, workspace, ledger):
    """A LiteLLM proxy or corporate gateway at OPENAI_BASE_URL: GPT-5.6 still gets
    max_completion_tokens, prompt_cache_key and explicit breakpoints, and its usage is read in
    OpenAI's dialect, `cache_write_tokens` included (billed as 30m writes, not as fresh input)."""
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": gateway.url + "/litellm/v1"}
    usage = {"prompt_tokens": 3000, "completion_tokens": 10, "total_tokens": 3010,
             "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 2900},
             "completion_tokens_details": {"reasoning_tokens": 4}}
    gateway.push(Reply(tool_calls=[READ], usage=usage), Reply(text="done", usage=usage))
    result, rows = run_two_steps(Router(env, overrides={}), "openai-chat/gpt-5.6", workspace, ledger)
    assert result.status == "end_turn"
    body = gateway.bodies("/chat/completions")[1]
    assert body["max_completion_tokens"] == 64 and body["prompt_cache_key"].startswith("hitrate-")
    assert any("prompt_cache_breakpoint" in p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"])
    assert (rows[0].usage.fresh_input, rows[0].usage.cache_write_30m, rows[0].usage.cache_read) == (100, 2900, 0)


def test_every_provider_honours_its_base_url():
    env = {"DEEPSEEK_BASE_URL": "http://127.0.0.1:1/ds", "GEMINI_BASE_URL": "http://127.0.0.1:1/gm",
           "OPENROUTER_BASE_URL": "http://127.0.0.1:1/or", "ANTHROPIC_BASE_URL": "http://127.0.0.1:1/an",
           "OPENAI_BASE_URL": "http://127.0.0.1:1/oa"}
    for spec, base, dialect in [("deepseek/deepseek-flash", "/ds", "deepseek"), ("gemini/gemini-3.5-flash", "/gm", "gemini_openai"),
                                ("openrouter/openai/gpt-5.6", "/or", "openrouter"), ("anthropic/claude-sonnet-5", "/an", "anthropic"),
                                ("openai-responses/gpt-5.6", "/oa", "openai")]:
        parsed = parse_model_spec(spec, env=env)
        assert parsed.base_url == "http://127.0.0.1:1" + base and parsed.quirks.usage_dialect == dialect, spec


def test_recorded_cloud_specs_are_read_back_without_their_credentials():
    from hitrate.harness.models import spec_model_name
    from hitrate.harness.resume import spec_labels

    assert spec_model_name("bedrock/us.anthropic.claude-sonnet-5-v1:0") == "us.anthropic.claude-sonnet-5-v1:0"
    assert spec_model_name("azure/my-deployment") == "my-deployment"
    assert spec_labels(["vertex/claude-sonnet-5@20260101", "openrouter/anthropic/claude-sonnet-5"]) == {
        "claude-sonnet-5@20260101": "vertex/claude-sonnet-5@20260101",
        "anthropic/claude-sonnet-5": "openrouter/anthropic/claude-sonnet-5",
    }
    with pytest.raises(ModelSpecError):
        spec_model_name("nope/x")
