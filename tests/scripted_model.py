"""The scripted model every harness and TUI test drives: a fixed list of replies standing in for a
model. Tests only; never a product feature.

Its usage follows the cache family of its rules (`projection.caching`): each prompt is stepped
through one cache of the family, so an Anthropic-style backend reads what its marks reach and writes
up to its last mark with that mark's TTL, and a prefix-cache server reads the longest prefix it has
seen. Script items are dicts:

    text          the reply's text (streamed in pieces)
    tool_calls    [(name, arguments JSON)]
    stop_reason   overrides "tool_use" / "end_turn"
    evicted       True: the provider lost its cache before this call (nothing is read)
    gate          a threading.Event: the first piece streams, then the call waits for the gate
    output        output tokens (default: 7 on the Chat wire, 40 on the Anthropic wire)

or an exception to raise.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any, Callable

from hitrate.harness.models import parse_model_spec
from hitrate.harness.router import Route, Router, rules_for
from hitrate.harness.wire.types import CallResult
from hitrate.projection.cache_view import cache_request
from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock
from hitrate.store.usage import WRITE_BUCKETS, Usage

COMPAT_URL = "http://127.0.0.1:9/v1"


class ScriptedModel:
    """A fixed list of replies behind a cache that follows `rules`."""

    def __init__(
        self,
        script: list[Any],
        model: str = "scripted",
        *,
        wire: str = "openai_chat",
        rules: CacheRules | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.script = list(script)
        self.model = model
        self.wire = wire
        self.label = f"anthropic/{model}" if wire == "anthropic_messages" else f"openai-compat/{model}@{COMPAT_URL}"
        self.rules = rules or CacheRules(family="anthropic" if wire == "anthropic_messages" else "openai_compat")
        self._family = family_for(self.rules)
        self._cache = self._family.cache()
        self.prompts: list[Prompt] = []
        self.clock = clock
        """When each call reaches the provider's cache (a test passes the session's clock)."""
        self.closed = False
        self.waiting = threading.Event()
        """Set while a gated call waits (tests wait for it before pressing Esc)."""

    def close(self) -> None:
        self.closed = True

    def _stream(self, item: dict[str, Any], on_text) -> None:
        text = item.get("text", "")
        if not text or on_text is None:
            return
        size = 12 if self.wire == "anthropic_messages" else 3
        pieces = [text[:size], text[size:]] if self.wire != "anthropic_messages" else [text[i : i + size] for i in range(0, len(text), size)]
        on_text(pieces[0])
        gate = item.get("gate")
        if gate is not None:
            self.waiting.set()
            gate.wait(10)
        for piece in pieces[1:]:
            if piece:
                on_text(piece)

    def call(self, prompt: Prompt, *, max_tokens: int, on_text=None) -> CallResult:
        if not self.script:
            raise AssertionError("scripted model ran out of replies")
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        self._stream(item, on_text)
        if item.get("evicted"):
            self._cache = self._family.cache()
        outcome = self._cache.step(cache_request(prompt, started_at=self.clock(), session_id="scripted"))
        self.prompts.append(prompt)
        blocks: list[Any] = [TextBlock(text=item["text"])] if item.get("text") else []
        prefix = "toolu" if self.wire == "anthropic_messages" else "call"
        for i, (name, args) in enumerate(item.get("tool_calls", [])):
            blocks.append(ToolCallBlock(call_id=f"{prefix}_{len(self.prompts):02d}_{i}", name=name, arguments=args))
        total = prompt.total_tokens
        writes = {**dict.fromkeys(WRITE_BUCKETS, 0), **{f"cache_write_{ttl}": n for ttl, n in outcome.writes.items()}}
        if self.wire == "anthropic_messages":
            output = item.get("output", 40)
            usage = Usage(fresh_input=outcome.fresh, cache_read=outcome.read, output=output, **writes)
            raw = {"input_tokens": outcome.fresh, "cache_read_input_tokens": outcome.read, "cache_creation_input_tokens": outcome.written}
        else:
            output = item.get("output", 7)
            usage = Usage(fresh_input=outcome.fresh, cache_read=outcome.read, output=output, prompt_total=total, **writes)
            raw = {"prompt_tokens": total, "completion_tokens": output, "prompt_tokens_details": {"cached_tokens": outcome.read}}
        return CallResult(
            assistant=AssistantMessage(content=tuple(blocks)) if blocks else None,
            usage=usage,
            raw_usage=raw,
            stop_reason=item.get("stop_reason") or ("tool_use" if item.get("tool_calls") else "end_turn"),
            model=self.model,
            latency_s=0.01 if self.wire != "anthropic_messages" else 0.02,
            ttft_s=0.005 if self.wire != "anthropic_messages" else 0.01,
        )


def scripted_route(script: list[Any], model: str = "scripted", rules: CacheRules | None = None) -> Route:
    """A Chat-wire scripted backend behind a self-hosted prefix cache (or `rules`)."""
    spec = parse_model_spec(f"openai-compat/{model}@{COMPAT_URL}", env={})
    rules = rules or CacheRules(family="openai_compat")
    return Route(spec=spec, backend=ScriptedModel(script, model, rules=rules), rules=rules, explain_rules=rules)


class ScriptedRouter(Router):
    """Resolves `anthropic/<model>` specs to scripted Anthropic backends, one script per model."""

    def __init__(self, scripts: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__(env={"ANTHROPIC_API_KEY": "unused", "OPENAI_API_KEY": "unused"}, preflight=False)
        self.scripts = scripts
        self.backends: dict[str, ScriptedModel] = {}

    def resolve(self, spec):  # type: ignore[override]
        parsed = self.parse(spec)
        if parsed.label not in self.scripts:
            raise ValueError(f"no script for {parsed.label}")
        rules, explain = rules_for(parsed, self.price_table)
        backend = ScriptedModel(self.scripts[parsed.label], parsed.model, wire="anthropic_messages", rules=explain)
        self.backends[parsed.label] = backend
        return Route(spec=parsed, backend=backend, rules=rules, explain_rules=explain)


def anthropic_spec(model: str):
    return parse_model_spec(f"anthropic/{model}", env={"ANTHROPIC_API_KEY": "unused"})
