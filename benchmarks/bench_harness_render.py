"""Harness overhead per request on a long session: projection of the next request plus rendering it
into each wire format (the body handed to the SDK), excluding the network and the model.

Session: 300 messages (150 assistant turns with a tool call, 150 tool results of ~2.4 KB each,
about 100K estimated tokens) on the default tool set and system prompt. Prints the median time
per request for: projecting the next request incrementally, rendering it for Anthropic Messages,
rendering it for OpenAI Chat Completions, and JSON-encoding each body as the SDKs do.

    .venv/bin/python benchmarks/bench_harness_render.py
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from hitrate.harness.models import Quirks
from hitrate.harness.session import session_inputs
from hitrate.harness.wire.anthropic import render_messages_request
from hitrate.harness.wire.openai_chat import render_chat_request
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock, ToolResultBlock, Transcript, UserMessage

TURNS = 150
RESULT_TEXT = ("line of tool output with some code: def f(x): return x * 2  # comment\n" * 34)[:2400]


def build_transcript() -> list:
    messages: list = [UserMessage(content=(TextBlock(text="Refactor the parser and keep the tests green."),))]
    for i in range(TURNS):
        messages.append(AssistantMessage(content=(
            TextBlock(text=f"Looking at part {i}."),
            ToolCallBlock(call_id=f"toolu_{i:04d}", name="read_file", arguments=json.dumps({"path": f"src/mod_{i}.py"})),
        )))
        messages.append(UserMessage(content=(ToolResultBlock(call_id=f"toolu_{i:04d}", content=RESULT_TEXT),)))
    return messages


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    inputs = session_inputs(Path(tempfile.mkdtemp()))
    messages = build_transcript()
    rules = CacheRules(family="anthropic", min_cacheable_tokens=1024)
    projector = Projector(rules, session_id="bench")
    transcript = Transcript()
    quirks = Quirks(usage_dialect="openai", send_prompt_cache_key=True)
    project_t: list[float] = []
    anthropic_t: list[float] = []
    openai_t: list[float] = []
    encode_t: list[float] = []
    prompt = None
    for n, message in enumerate(messages):
        transcript = transcript.append(message)
        if not isinstance(message, UserMessage):
            continue
        t0 = time.perf_counter()
        prompt = projector.project(model="claude-sonnet-5", tools=inputs.tool_specs, system=inputs.system,
                                   transcript=transcript, docs=inputs.docs, context={"date": "2026-01-02"})
        t1 = time.perf_counter()
        a_body = render_messages_request(prompt, max_tokens=4096)
        t2 = time.perf_counter()
        o_body = render_chat_request(prompt, quirks, max_tokens=4096)
        t3 = time.perf_counter()
        json.dumps(a_body, ensure_ascii=False, separators=(",", ":"))
        json.dumps(o_body, ensure_ascii=False, separators=(",", ":"))
        t4 = time.perf_counter()
        transcript = transcript.freeze_context(prompt.tail)
        if n >= len(messages) - 21:  # the last 10 requests: the long-session steady state
            project_t.append(t1 - t0)
            anthropic_t.append(t2 - t1)
            openai_t.append(t3 - t2)
            encode_t.append(t4 - t3)
    assert prompt is not None
    print(f"session: {len(prompt.messages)} messages, ~{prompt.total_tokens:,} estimated tokens, "
          f"{len(prompt.breakpoints)} cache marks")
    print(f"project next request (incremental): {median_ms(project_t):7.2f} ms")
    print(f"render Anthropic Messages body:     {median_ms(anthropic_t):7.2f} ms")
    print(f"render OpenAI Chat body:            {median_ms(openai_t):7.2f} ms")
    print(f"JSON-encode both bodies:            {median_ms(encode_t):7.2f} ms")


if __name__ == "__main__":
    main()
