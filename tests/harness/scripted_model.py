"""A scripted model for the agent-loop tests: a fixed list of replies standing in for a model.
Tests only; never a product feature."""

from __future__ import annotations

from typing import Any

from hitrate.harness.models import parse_model_spec
from hitrate.harness.router import Route
from hitrate.harness.wire_types import CallResult
from hitrate.projection.caching import CacheRules
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock
from hitrate.store.usage import WRITE_BUCKETS, Usage


class ScriptedBackend:
    """A fixed list of replies standing in for a model. Each item is a dict with "text" and/or
    "tool_calls" [(name, arguments JSON)] (and optionally "stop_reason"), or a CallError to raise. Usage mimics an automatic prefix
    cache: the tokens shared with the previous prompt (by section hash) are read, the rest is fresh;
    an item with "evicted": True reads nothing (the provider's entry expired)."""

    wire = "openai_chat"

    def __init__(self, script: list[Any], model: str = "scripted") -> None:
        self.script = list(script)
        self.model = model
        self.label = f"openai-compat/{model}@http://127.0.0.1:9/v1"
        self.prompts: list[Prompt] = []
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def _read(self, prompt: Prompt) -> int:
        if not self.prompts:
            return 0
        previous = self.prompts[-1]
        read = 0
        for a, b in zip(previous.sections, prompt.sections):
            if a.hash != b.hash:
                break
            read = b.prefix_tokens
        return read

    def call(self, prompt: Prompt, *, max_tokens: int, on_text=None) -> CallResult:
        if not self.script:
            raise AssertionError("scripted model ran out of replies")
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        read = 0 if item.get("evicted") else self._read(prompt)
        self.prompts.append(prompt)
        blocks: list[Any] = []
        if item.get("text"):
            if on_text is not None:
                for piece in (item["text"][:3], item["text"][3:]):
                    if piece:
                        on_text(piece)
            blocks.append(TextBlock(text=item["text"]))
        for i, (name, args) in enumerate(item.get("tool_calls", [])):
            blocks.append(ToolCallBlock(call_id=f"call_{len(self.prompts)}_{i}", name=name, arguments=args))
        total = prompt.total_tokens
        usage = Usage(fresh_input=total - read, cache_read=read, output=7, prompt_total=total,
                      **dict.fromkeys(WRITE_BUCKETS, 0))
        return CallResult(
            assistant=AssistantMessage(content=tuple(blocks)) if blocks else None,
            usage=usage,
            raw_usage={"prompt_tokens": total, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": read}},
            stop_reason=item.get("stop_reason") or ("tool_use" if item.get("tool_calls") else "end_turn"),
            model=self.model,
            latency_s=0.01,
            ttft_s=0.005,
        )


def scripted_route(script: list[Any], model: str = "scripted", rules: CacheRules | None = None) -> Route:
    spec = parse_model_spec(f"openai-compat/{model}@http://127.0.0.1:9/v1", env={})
    rules = rules or CacheRules(family="openai_compat")
    return Route(spec=spec, backend=ScriptedBackend(script, model), rules=rules, explain_rules=rules)
