"""Test backends for the eval runner: a provider-like automatic prefix cache shared by every request
(so cold nonces, warm reuse and the naive layout have measurable effects), and a scripted model.
Tests only; never a product feature."""

from __future__ import annotations

import threading
from typing import Any, Callable

from hitrate.harness.models import parse_model_spec
from hitrate.harness.router import Route
from hitrate.harness.wire.types import CallError, CallResult
from hitrate.projection.caching import CacheRules
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock
from hitrate.store.usage import WRITE_BUCKETS, Usage

SPEC = "openai-compat/fake@http://127.0.0.1:9/v1"


class PrefixCacheBackend:
    """Answers every request; usage as an automatic prefix cache over section boundaries would
    report it: the longest prefix (by chained section hash) any earlier request sent is read.

    `replies` (optional) is a script of assistant turns: dicts with "text" and/or "tool_calls"
    [(name, arguments JSON)]; without one, every reply is a short text (what a replay ignores).
    `fail` decides, per prompt, whether the call raises a CallError instead."""

    wire = "openai_chat"
    model = "fake"
    label = SPEC

    def __init__(self, replies: list[dict[str, Any]] | None = None, fail: Callable[[Prompt], CallError | None] | None = None,
                 delay: Callable[[Prompt], float] | None = None) -> None:
        self.replies = list(replies) if replies is not None else None
        self.fail = fail
        self.delay = delay
        self.prompts: list[Prompt] = []
        self.usages: list[Usage] = []
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Routes of many tasks share this backend; nothing to close."""

    def call(self, prompt: Prompt, *, max_tokens: int, on_text=None) -> CallResult:
        if self.fail is not None:
            error = self.fail(prompt)
            if error is not None:
                raise error
        if self.delay is not None:
            threading.Event().wait(self.delay(prompt))
        with self._lock:
            read = 0
            for section in prompt.sections:
                if section.hash not in self._seen:
                    break
                read = section.prefix_tokens
            for section in prompt.sections:
                self._seen.setdefault(section.hash, section.prefix_tokens)
            self.prompts.append(prompt)
            item = self.replies.pop(0) if self.replies else {"text": "ok"}
        blocks: list[Any] = []
        if item.get("text"):
            blocks.append(TextBlock(text=item["text"]))
        for i, (name, args) in enumerate(item.get("tool_calls", [])):
            blocks.append(ToolCallBlock(call_id=f"call_{len(self.prompts)}_{i}", name=name, arguments=args))
        total = prompt.total_tokens
        usage = Usage(fresh_input=total - read, cache_read=read, output=3, prompt_total=total, **dict.fromkeys(WRITE_BUCKETS, 0))
        with self._lock:
            self.usages.append(usage)
        return CallResult(
            assistant=AssistantMessage(content=tuple(blocks)) if blocks else None,
            usage=usage,
            raw_usage={"prompt_tokens": total, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": read}},
            stop_reason="tool_use" if item.get("tool_calls") else "end_turn",
            model=self.model,
            latency_s=0.001,
            ttft_s=0.001,
        )


class FakeRoutes:
    """A RouteSource handing out routes to one shared backend."""

    def __init__(self, backend: PrefixCacheBackend) -> None:
        self.backend = backend
        self.opened = 0

    def open(self) -> Route:
        self.opened += 1
        rules = CacheRules(family="openai_compat")
        return Route(spec=parse_model_spec(SPEC, env={}), backend=self.backend, rules=rules, explain_rules=rules)

    def close(self) -> None:
        pass


def workspace_of(prompt: Prompt) -> str:
    """The workspace path in the request's dynamic context (the task's temporary copy)."""
    return str(prompt.context.get("workspace", ""))


def first_user_text(prompt: Prompt) -> str:
    first = prompt.messages[0]
    return "".join(getattr(b, "text", "") for b in first.content)


def fake_llm_server_module():
    """The harness tests' recording OpenAI-compatible server on 127.0.0.1 (tests/harness/
    fake_llm_server.py), loaded once; Ray workers and CLI subprocesses reach it over HTTP."""
    import importlib.util
    import sys
    from pathlib import Path

    if "fake_llm_server" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fake_llm_server", Path(__file__).parents[1] / "harness" / "fake_llm_server.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["fake_llm_server"] = module
        spec.loader.exec_module(module)
    return sys.modules["fake_llm_server"]
