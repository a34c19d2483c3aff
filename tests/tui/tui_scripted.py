"""A scripted model for the TUI tests: a fixed list of replies standing in for a model behind an
Anthropic-style cache. Tests only; never a product feature.

Usage follows Anthropic's rules on the real projection's prompts: the prefix shared with the
previous request (by section hash, up to that request's last cache mark) is read, the rest up to
this request's last mark is written with the mark's TTL, and what follows the last mark is fresh.
"""

from __future__ import annotations

import threading
from typing import Any

from hitrate.harness.models import parse_model_spec
from hitrate.harness.router import Route, Router, rules_for
from hitrate.harness.wire_types import CallResult
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock
from hitrate.store.usage import WRITE_BUCKETS, Usage


class ScriptedAnthropic:
    """Each script item: {"text": str, "tool_calls": [(name, arguments JSON)], "gate": Event}.
    With a gate, the first piece of text streams, then the call waits for the gate before the rest
    (how a test holds a call open to press Esc)."""

    wire = "anthropic_messages"

    def __init__(self, script: list[dict[str, Any]], model: str) -> None:
        self.script = list(script)
        self.model = model
        self.label = f"anthropic/{model}"
        self.prompts: list[Prompt] = []
        self.closed = False
        self.waiting = threading.Event()
        """Set while a gated call waits (tests wait for it before pressing Esc)."""

    def close(self) -> None:
        self.closed = True

    def _read(self, prompt: Prompt) -> int:
        if not self.prompts or not self.prompts[-1].breakpoints:
            return 0
        previous = self.prompts[-1]
        cached_to = previous.breakpoints[-1].prefix_tokens
        read = 0
        for a, b in zip(previous.sections, prompt.sections):
            if a.hash != b.hash or b.prefix_tokens > cached_to:
                break
            read = b.prefix_tokens
        return read

    def call(self, prompt: Prompt, *, max_tokens: int, on_text=None) -> CallResult:
        if not self.script:
            raise AssertionError("scripted model ran out of replies")
        item = self.script.pop(0)
        text = item.get("text", "")
        if text and on_text is not None:
            pieces = [text[i : i + 12] for i in range(0, len(text), 12)]
            on_text(pieces[0])
            gate = item.get("gate")
            if gate is not None:
                self.waiting.set()
                gate.wait(10)
            for piece in pieces[1:]:
                on_text(piece)
        read = self._read(prompt)
        self.prompts.append(prompt)
        total = prompt.total_tokens
        marked = prompt.breakpoints[-1].prefix_tokens if prompt.breakpoints else 0
        ttl = prompt.breakpoints[-1].ttl if prompt.breakpoints else "5m"
        write = max(0, marked - read)
        buckets = {**dict.fromkeys(WRITE_BUCKETS, 0), f"cache_write_{ttl}": write}
        usage = Usage(fresh_input=total - read - write, cache_read=read, output=item.get("output", 40), **buckets)
        blocks: list[Any] = [TextBlock(text=text)] if text else []
        for i, (name, args) in enumerate(item.get("tool_calls", [])):
            blocks.append(ToolCallBlock(call_id=f"toolu_{len(self.prompts):02d}_{i}", name=name, arguments=args))
        return CallResult(
            assistant=AssistantMessage(content=tuple(blocks)) if blocks else None,
            usage=usage,
            raw_usage={"input_tokens": usage.fresh_input, "cache_read_input_tokens": read, "cache_creation_input_tokens": write},
            stop_reason="tool_use" if item.get("tool_calls") else "end_turn",
            model=self.model,
            latency_s=0.02,
            ttft_s=0.01,
        )


class ScriptedRouter(Router):
    """Resolves `anthropic/<model>` specs to scripted backends, one script per model."""

    def __init__(self, scripts: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__(env={"ANTHROPIC_API_KEY": "unused", "OPENAI_API_KEY": "unused"}, preflight=False)
        self.scripts = scripts
        self.backends: dict[str, ScriptedAnthropic] = {}

    def resolve(self, spec):  # type: ignore[override]
        parsed = self.parse(spec)
        if parsed.label not in self.scripts:
            raise ValueError(f"no script for {parsed.label}")
        backend = ScriptedAnthropic(self.scripts[parsed.label], parsed.model)
        self.backends[parsed.label] = backend
        rules, explain = rules_for(parsed, self.price_table)
        return Route(spec=parsed, backend=backend, rules=rules, explain_rules=explain)


def anthropic_spec(model: str):
    return parse_model_spec(f"anthropic/{model}", env={"ANTHROPIC_API_KEY": "unused"})
