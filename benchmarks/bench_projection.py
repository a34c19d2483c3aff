"""Time to build the next request of a long session: incremental vs from scratch.

A 300-message session (~100K estimated tokens: 150 rounds of a model turn with parallel tool calls
and a user turn with their results). The projector has already built the previous request; each
timed step appends one new round (2 new messages, a changed 'budget_left' in the dynamic context)
and builds the request. Goal: <= 2 ms, independent of the history's size.

Run: .venv/bin/python benchmarks/bench_projection.py
"""

from __future__ import annotations

import statistics
import time

from pydantic import BaseModel

from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector, SystemPrompt, project
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import (
    AssistantMessage,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
    UserMessage,
)


class PathArgs(BaseModel):
    path: str
    limit: int = 200


TOOLS = [ToolSpec.from_args_model(f"tool_{i:02d}", f"Tool number {i}.", PathArgs) for i in range(12)]
SYSTEM = SystemPrompt(template="You are {{ name }}.\n" + "Follow the rules.\n" * 40, variables={"name": "hitrate"})
RULES = CacheRules(family="anthropic", min_cacheable_tokens=1024)


def make_round(i: int) -> tuple[AssistantMessage, UserMessage]:
    reply = AssistantMessage(
        content=(
            TextBlock(text=f"Looking at part {i} of the code base. " * 3),
            ToolCallBlock(call_id=f"call_{i}_a", name="tool_01", arguments=f'{{"path": "src/m{i}.py"}}'),
            ToolCallBlock(call_id=f"call_{i}_b", name="tool_02", arguments=f'{{"path": "src/n{i}.py", "limit": 50}}'),
        )
    )
    output = "".join(f"{n:4d}  def function_{i}_{n}(x):  return x * {n}\n" for n in range(30))
    answer = UserMessage(
        content=(
            ToolResultBlock(call_id=f"call_{i}_a", content=output),
            ToolResultBlock(call_id=f"call_{i}_b", content=output[:1000]),
        )
    )
    return reply, answer


def context(i: int) -> dict[str, str]:
    return {"date": "2026-11-29", "cwd": "/work/repo", "budget_left": f"${100 - i * 0.01:.2f}"}


def main() -> None:
    projector = Projector(RULES, session_id="bench")
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="Refactor the project."),)))
    prompt = projector.project(model="m", tools=TOOLS, system=SYSTEM, transcript=transcript, context=context(0))
    transcript = transcript.freeze_context(prompt.tail)
    rounds = 149  # 1 + 2 * 149 = 299 messages; each timed step adds the 300th and 301st
    for i in range(1, rounds + 1):
        transcript = transcript.extend(make_round(i))
    prompt = projector.project(model="m", tools=TOOLS, system=SYSTEM, transcript=transcript, context=context(rounds))
    base = transcript.freeze_context(prompt.tail)
    projector.project(model="m", tools=TOOLS, system=SYSTEM, transcript=base, context=context(rounds))

    times = []
    for step in range(300):
        reply, answer = make_round(1000 + step)  # new objects: new content every step
        nxt = base.append(reply).append(answer)
        start = time.perf_counter()
        prompt = projector.project(model="m", tools=TOOLS, system=SYSTEM, transcript=nxt, context=context(1000 + step))
        times.append(time.perf_counter() - start)

    cold = []
    for _ in range(5):
        start = time.perf_counter()
        project(rules=RULES, model="m", tools=TOOLS, system=SYSTEM, transcript=nxt, context=context(0), session_id="bench")
        cold.append(time.perf_counter() - start)

    ms = sorted(t * 1000 for t in times)
    cold_ms = statistics.median(cold) * 1000
    inc_ms = statistics.median(ms)
    print(f"session: {len(prompt.messages)} messages, {len(prompt.sections)} sections, ~{prompt.total_tokens:,} estimated tokens")
    print(f"incremental next request: median {inc_ms:.3f} ms, p90 {ms[int(len(ms) * 0.9)]:.3f} ms, max {ms[-1]:.3f} ms (goal <= 2 ms)")
    print(f"from scratch:             median {cold_ms:.2f} ms")
    print(f"ratio scratch / incremental: {cold_ms / inc_ms:.0f}x")


if __name__ == "__main__":
    main()
