"""Usage normalization per dialect, through the adapters and the real SDKs (streamed over HTTP)."""

from __future__ import annotations

import pytest
from fake_llm_server import Reply

from hitrate.harness.models import Quirks, parse_model_spec
from hitrate.harness.wire.anthropic import AnthropicBackend
from hitrate.harness.wire.openai_chat import OpenAIChatBackend
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.transcript import TextBlock, ThinkingBlock, Transcript, UserMessage


def prompt_for(family: str, model: str = "m"):
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="hello"),)))
    return Projector(CacheRules(family=family)).project(model=model, tools=[], system="You help.", transcript=transcript)


def test_anthropic_stream_usage_merges_start_and_delta_with_ttl_split(fake_server):
    fake_server.push(Reply(text="hi", usage={
        "input_tokens": 21, "cache_creation_input_tokens": 188086, "cache_read_input_tokens": 1000,
        "cache_creation": {"ephemeral_5m_input_tokens": 88086, "ephemeral_1h_input_tokens": 100000},
        "output_tokens": 393,
    }))
    backend = AnthropicBackend(model="claude-sonnet-5", api_key="k", base_url=fake_server.url)
    result = backend.call(prompt_for("anthropic", "claude-sonnet-5"), max_tokens=50)
    u = result.usage
    assert (u.fresh_input, u.cache_write_5m, u.cache_write_1h, u.cache_read, u.output) == (21, 88086, 100000, 1000, 393)
    # message_start reported output_tokens=1; message_delta's 393 wins; raw keeps the split as sent.
    assert result.raw_usage["output_tokens"] == 393
    assert result.raw_usage["cache_creation"]["ephemeral_1h_input_tokens"] == 100000
    assert result.stop_reason == "end_turn" and result.request_id == "req_fake" and result.response_id == "msg_fake"
    assert result.ttft_s is not None and result.latency_s >= result.ttft_s


@pytest.mark.parametrize(
    ("base", "usage", "expected"),
    [
        # DeepSeek's native fields are read (and its host selects the dialect, not the model name).
        ("deepseek", {"prompt_tokens": 1000, "completion_tokens": 20, "prompt_cache_hit_tokens": 768,
                      "prompt_cache_miss_tokens": 232}, (232, 768, 20, 1000)),
        # OpenAI: cached tokens are inside prompt_tokens.
        ("openai", {"prompt_tokens": 2006, "completion_tokens": 300,
                    "prompt_tokens_details": {"cached_tokens": 1920},
                    "completion_tokens_details": {"reasoning_tokens": 100}}, (86, 1920, 300, 2006)),
        # A vLLM-like server without cached_tokens: unknown, not zero.
        ("compat", {"prompt_tokens": 500, "completion_tokens": 9}, (None, None, 9, 500)),
        ("compat", {"prompt_tokens": 500, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0}}, (500, 0, 9, 500)),
    ],
)
def test_openai_chat_usage_by_dialect(fake_server, base, usage, expected):
    url = fake_server.url + "/v1"
    dialect = {"deepseek": "deepseek", "openai": "openai", "compat": "openai_compat"}[base]
    quirks = Quirks(usage_dialect=dialect)
    model = {"deepseek": "deepseek-flash", "openai": "gpt-5.4", "compat": "qwen"}[base]
    fake_server.push(Reply(text="ok", usage=usage))
    backend = OpenAIChatBackend(model=model, api_key="k", base_url=url, quirks=quirks)
    result = backend.call(prompt_for("openai_compat", model), max_tokens=10)
    u = result.usage
    assert (u.fresh_input, u.cache_read, u.output, u.prompt_tokens if u.prompt_tokens is not None else u.prompt_total) == expected
    assert result.raw_usage == usage  # exactly as sent, extra fields (DeepSeek's) included
    if base == "openai":
        assert u.reasoning == 100 and u.output == 300  # reasoning is a subset, never added


def test_quirks_follow_the_provider_named_not_the_model_name_or_host():
    vllm = parse_model_spec("openai-compat/deepseek-coder@http://127.0.0.1:8000/v1", env={})
    assert vllm.quirks.usage_dialect == "openai_compat"
    gateway = parse_model_spec("deepseek/deepseek-flash", env={"DEEPSEEK_BASE_URL": "http://127.0.0.1:9/v1"})
    assert gateway.quirks.usage_dialect == "deepseek" and gateway.base_url == "http://127.0.0.1:9/v1"
    openai_default = parse_model_spec("openai/gpt-5.6", env={})
    assert openai_default.quirks.send_prompt_cache_key and openai_default.quirks.max_tokens_field == "max_completion_tokens"
    # A gateway in front of OpenAI (LiteLLM, a corporate proxy) keeps OpenAI's semantics.
    redirected = parse_model_spec("openai/gpt-5.6", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert redirected.quirks == openai_default.quirks


def test_stream_without_usage_is_unknown_not_zero(fake_server):
    quirks = Quirks(usage_dialect="openai_compat", stream_usage=False)
    fake_server.push(Reply(text="ok"))
    backend = OpenAIChatBackend(model="m", api_key="k", base_url=fake_server.url + "/v1", quirks=quirks)
    result = backend.call(prompt_for("openai_compat"), max_tokens=10)
    assert "stream_options" not in fake_server.requests[-1].json()
    assert result.usage.fresh_input is None and result.usage.cache_read is None and result.usage.output is None


def test_deepseek_reasoning_is_kept_and_sent_back(fake_server):
    url = fake_server.url + "/v1"
    quirks = Quirks(usage_dialect="deepseek")
    fake_server.push(Reply(reasoning="think first", tool_calls=[("call_0", "list_dir", "{}")],
                           usage={"prompt_tokens": 10, "completion_tokens": 5, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 10}))
    backend = OpenAIChatBackend(model="deepseek-flash", api_key="k", base_url=url, quirks=quirks)
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="hi"),)))
    projector = Projector(CacheRules(family="deepseek"))
    result = backend.call(projector.project(model="deepseek-flash", tools=[], system="s", transcript=transcript), max_tokens=10)
    thinking = [b for b in result.assistant.content if isinstance(b, ThinkingBlock)]
    assert thinking[0].thinking == "think first"
    from hitrate.projection.transcript import ToolResultBlock

    transcript = transcript.append(result.assistant).append(UserMessage(content=(ToolResultBlock(call_id="call_0", content="a.py"),)))
    fake_server.push(Reply(text="done"))
    backend.call(projector.project(model="deepseek-flash", tools=[], system="s", transcript=transcript), max_tokens=10)
    sent = fake_server.requests[-1].json()["messages"]
    assistant = [m for m in sent if m["role"] == "assistant"][0]
    assert assistant["reasoning_content"] == "think first"
    assert assistant["tool_calls"][0]["function"] == {"name": "list_dir", "arguments": "{}"}
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "a.py"}
