"""Per-step context (the budget left, a changed git state) rides inside the tool-result turn: the
harness never makes a user message between two tool rounds.

The requests a real agent run sends (the real openai SDK to the recording server, a DeepSeek route
whose replies carry `reasoning_content`) are rendered through a Qwen3-style chat template. Such
templates print an assistant turn's reasoning only after the last *user query*; a harness-made
user message after every tool round would drop the reasoning of every earlier step and change the
rendered prefix, so the prefix cache would miss on each step."""

from __future__ import annotations

import json

import jinja2
import pytest
from fake_llm_server import Reply

from hitrate.engine.wire.anthropic import parse_request
from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.router import Router
from hitrate.harness.session import Session, SessionConfig

# A Qwen3-style template, reduced to the rules that matter here: ChatML turns, tool results shown
# to the model inside a user turn as <tool_response>, and an assistant turn's reasoning kept only
# when it comes after the last real user query.
QWEN3_STYLE = """\
{%- set ns = namespace(last_query=-1) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_query = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- for m in messages -%}
{%- if m.role in ('system', 'user') -%}
<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% elif m.role == 'assistant' -%}
<|im_start|>assistant
{% if m.reasoning_content and loop.index0 > ns.last_query %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content or '' }}{% for call in m.tool_calls or [] %}<tool_call>
{{ call | tojson }}
</tool_call>{% endfor %}<|im_end|>
{% else -%}
<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}
"""

TEMPLATE = jinja2.Environment(keep_trailing_newline=True).from_string(QWEN3_STYLE)

REASONING = ["I should read calc.py first.", "The bug is the minus sign; check the tests next."]


def text_of(content) -> str:
    return content if isinstance(content, str) else "\n\n".join(p["text"] for p in content)


def template_messages(body: dict) -> list[dict]:
    """A Chat Completions body as the template's input (what a server such as vLLM hands it)."""
    out = []
    for m in body["messages"]:
        entry = {"role": m["role"], "content": text_of(m["content"]) if m.get("content") is not None else ""}
        if m.get("reasoning_content"):
            entry["reasoning_content"] = m["reasoning_content"]
        if m.get("tool_calls"):
            entry["tool_calls"] = [
                {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])} for c in m["tool_calls"]
            ]
        out.append(entry)
    return out


def render(messages: list[dict], generation: bool = False) -> str:
    return TEMPLATE.render(messages=messages, add_generation_prompt=generation)


def split_context_out(messages: list[dict]) -> list[dict]:
    """The layout this replaced: each tool round's context as a user message of its own."""
    out = []
    for m in messages:
        head, sep, context = m["content"].partition("\n\n<context>")
        if m["role"] == "tool" and sep:
            out += [dict(m, content=head), {"role": "user", "content": "<context>" + context}]
        else:
            out.append(m)
    return out


@pytest.fixture
def recorded(fake_server, workspace, ledger):
    """The three requests of a run with two tool rounds, the budget shown to the model."""
    fake_server.push(
        Reply(reasoning=REASONING[0], tool_calls=[("call_1", "read_file", '{"path": "calc.py"}')]),
        Reply(reasoning=REASONING[1], tool_calls=[("call_2", "list_files", '{"path": "."}')]),
        Reply(text="The bug is in add."),
    )
    route = Router({"DEEPSEEK_API_KEY": "k", "DEEPSEEK_BASE_URL": fake_server.url + "/v1"}, overrides={}).resolve(
        "deepseek/deepseek-flash"
    )
    session = Session(route, workspace, ledger=ledger, context=lambda: {"date": "2026-01-02"}, sleep=lambda s: None,
                      config=SessionConfig(max_output_tokens=64))
    result = Agent(session, limits=AgentLimits(max_steps=5)).run("Find the bug in calc.py")
    session.close()
    assert result.status == "end_turn"
    return fake_server.bodies("/chat/completions")


def test_no_user_message_between_tool_rounds(recorded):
    roles = [[m["role"] for m in body["messages"]] for body in recorded]
    assert roles[-1] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    # The budget left changed every step; each change went out inside the tool-result turn.
    tools = [m for m in recorded[-1]["messages"] if m["role"] == "tool"]
    assert all("<context>\nbudget left: " in text_of(m["content"]) for m in tools)
    assert "budget left: 5 model calls" in text_of(recorded[0]["messages"][1]["content"])  # the real user turn


def test_earlier_reasoning_survives_a_qwen3_style_template(recorded):
    last = template_messages(recorded[-1])
    rendered = render(last, generation=True)
    assert all(f"<think>\n{r}\n</think>" in rendered for r in REASONING)
    # Append-only as the template renders it: each request's rendering starts with the previous one's.
    for earlier, later in zip(recorded, recorded[1:]):
        assert render(template_messages(later)).startswith(render(template_messages(earlier)))

    # Control: with a user message after each tool round the same template drops the reasoning.
    old = render(split_context_out(last), generation=True)
    assert "<|im_start|>user\n<context>\nbudget left" in old
    assert not any(r in old for r in REASONING)


def test_engine_keeps_text_after_tool_results_in_the_tool_turn():
    """The bundled engine serves the Anthropic wire (local/ routes): text after the tool results of a
    user turn joins the last tool message instead of becoming a new user query."""
    payload = {
        "model": "m", "max_tokens": 8,
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                                         {"type": "text", "text": "<context>\nbudget left: 3\n</context>"}]},
        ],
    }
    _, chat = parse_request(payload, salt_header=None)
    assert [m.role for m in chat.messages] == ["user", "assistant", "tool"]
    assert chat.messages[-1].content == "A\n\n<context>\nbudget left: 3\n</context>"
    payload["messages"][-1]["content"].insert(0, {"type": "text", "text": "also this"})
    _, chat = parse_request(payload, salt_header=None)
    assert [m.role for m in chat.messages] == ["user", "assistant", "user", "tool"]  # text before results stays a user turn
