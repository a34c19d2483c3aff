"""Provider-native compaction in a live session (`compaction = "native"`), as a mixin of `Session`.

Where the route's provider compacts on its own server (Anthropic's Messages API, the
`compact-2026-01-12` beta: `harness.wire.anthropic_compaction`; OpenAI's Responses API,
`context_management` with `compact_threshold`: `harness.wire.responses_compaction`), the session
asks it to, at the
same threshold the client-side compaction uses (`compact_at` × the window), and leaves the
threshold to it: no client-side summary call, no clearing. When a reply carries a compaction
block, the session folds its transcript the way the server reads it: everything before that
assistant turn goes (the server drops it anyway), a fixed placeholder user turn takes its place so
roles still alternate, and the next call's miss is labelled `compacted`. The compaction's tokens
are billed on that call (`usage.iterations`, added into its buckets by the store).

Routes without it (Chat Completions, OpenAI-compatible servers, the bundled engine, DeepSeek, Gemini, gateways)
fall back to the client-side compaction, with the reason in `native_fallback`. A prompt the
provider refuses as too long is compacted client-side and retried once, whatever the mode.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from hitrate.harness.router import Route
from hitrate.harness.session_inputs import SessionConfig
from hitrate.harness.transcript_log import TranscriptLog
from hitrate.harness.wire import anthropic_compaction, responses_compaction
from hitrate.projection.compaction import CompactionPlan, compacted
from hitrate.projection.transcript import AssistantMessage, Transcript

NATIVE_PLACEHOLDER = "(the provider compacted the conversation before this point; its summary follows)"
"""The user turn standing for the history the provider compacted away (it reads from the
compaction block on, so these bytes only keep the transcript's roles alternating)."""


def native_compaction_api(route: Route) -> tuple[str | None, str]:
    """(the wire API whose server-side compaction the route can use, or None; why not)."""
    spec = route.spec
    if spec.wire == "anthropic_messages" and spec.provider == "anthropic" and route.local is None:
        return "anthropic", ""
    if spec.wire == "openai_responses" and spec.provider == "openai-responses":
        # Whoever serves the Responses API at the base URL is asked; one without compaction
        # refuses the field, and the session can be run with `--compaction client`.
        return "openai_responses", ""
    if spec.wire == "local_engine" or route.local is not None:
        return None, "the bundled engine has no server-side compaction: compacting client-side"
    return None, f"{spec.provider} has no server-side compaction hitrate can use: compacting client-side"


def is_compaction_block(block: Any) -> bool:
    """A block that is a provider's compaction (Anthropic's block, the Responses item)."""
    native = getattr(block, "native", None)
    if native is None or native.api not in (anthropic_compaction.API, responses_compaction.API):
        return False
    try:
        return json.loads(native.raw).get("type") == "compaction"
    except (json.JSONDecodeError, AttributeError):
        return False


def has_compaction(message: AssistantMessage | None) -> bool:
    return message is not None and any(is_compaction_block(b) for b in message.content)


class SessionNative:
    """Asks the provider to compact, and folds the transcript when it did."""

    route: Route
    config: SessionConfig
    transcript: Transcript
    _log: TranscriptLog
    _rewrite: tuple[str, str] | None
    context_window: Callable[[], int | None]

    @property
    def native_compaction(self) -> bool:
        """Whether the provider compacts this session's history (mode native, on a route with it)."""
        return self.config.compaction == "native" and native_compaction_api(self.route)[0] is not None

    @property
    def native_fallback(self) -> str | None:
        """Why a session set to native compaction compacts client-side; None when it does not."""
        if self.config.compaction != "native":
            return None
        return native_compaction_api(self.route)[1] or None

    def _arm_native_compaction(self) -> None:
        """Set (or clear) the backend's server-side compaction for the next call."""
        backend: Any = self.route.backend
        if not hasattr(backend, "context_management"):
            return
        if not self.native_compaction:
            backend.context_management = None
            return
        window = self.context_window()
        trigger = round(self.config.compact_at * window) if window is not None else None
        api = native_compaction_api(self.route)[0]
        if api == "anthropic":
            # Clearing, where asked, is the server's too: in batches of a tenth of the window, from
            # half the compaction threshold (the client-side path's CLEAR_FROM).
            clear = None
            if self.config.clear_tool_results and trigger is not None and window is not None:
                clear = anthropic_compaction.clear_tool_uses_edit(trigger // 2, max(1, window // 10))
            backend.context_management = anthropic_compaction.context_management(trigger, clear_tool_uses=clear)
        else:
            backend.context_management = responses_compaction.context_management(trigger)

    def _fold_native_compaction(self, assistant: AssistantMessage | None) -> bool:
        """After a reply was appended: if it carries a compaction block, start the transcript at
        that reply (after the placeholder turn). Returns whether it did."""
        if not has_compaction(assistant):
            return False
        messages = self.transcript.messages
        keep_from = max(i for i, m in enumerate(messages) if isinstance(m, AssistantMessage) and has_compaction(m))
        if keep_from == 0:
            return False
        plan = CompactionPlan(keep_from=keep_from, dropped_tokens=0, kept_tokens=0)
        self.transcript = compacted(self.transcript, plan, NATIVE_PLACEHOLDER)
        self._log.compaction(keep_from, NATIVE_PLACEHOLDER)
        self._rewrite = ("compacted", "the provider compacted the history (server-side compaction)")
        return True
