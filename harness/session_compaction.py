"""Keeping a session inside its model's context window: cache-aware compaction (see
`projection.compaction`), as a mixin of `Session`.

Before each call the session checks the projected prompt against the model's input window
(`SessionConfig.context_window`, else the price table's `max_input_tokens`); past
`SessionConfig.compact_at` of it, it compacts first. A provider that still refuses the prompt as too
long gets one compaction and one retry, never a loop. A compaction is:

1. the summary request: the session's next request with the compaction instruction at the tail,
   so it reads the whole history from the cache; recorded in the ledger with kind "compaction";
2. the compacted transcript: the summary, then the recent turns verbatim (the static head is not
   part of the transcript, so it stays cached); stored in the transcript log as one entry, so a
   resumed session is rebuilt the same way;
3. the next call's miss is labelled `compacted` with what the rewrite cost.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from hitrate.harness.context_window import input_window, route_served_window
from hitrate.harness.epochs import SessionEpochs
from hitrate.harness.resume import PreviousRequest
from hitrate.harness.router import Route
from hitrate.harness.session_inputs import SessionConfig
from hitrate.harness.transcript_log import TranscriptLog
from hitrate.harness.wire.types import CallError, CallResult
from hitrate.projection.compaction import compacted, needs_compaction, plan_compaction, summary_transcript
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import TextBlock, Transcript
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord

COMPACTION_KIND = "compaction"

# How providers word a prompt that does not fit: Anthropic "prompt is too long: N tokens > M
# maximum"; OpenAI and vLLM "maximum context length is N tokens"; OpenAI's error code
# "context_length_exceeded"; the bundled engine "exceeds the model's context window".
_TOO_LONG = ("prompt is too long", "maximum context length", "context_length_exceeded", "exceeds the model's context window")


def prompt_too_long(error: CallError) -> bool:
    """Whether a failed call was refused because its prompt does not fit the model's window."""
    text = str(error).lower()
    return error.kind == "client_error" and any(words in text for words in _TOO_LONG)


class SessionCompaction:
    """Compacts a session's transcript when it nears the model's window."""

    id: str
    route: Route
    config: SessionConfig
    price_table: PriceTable
    transcript: Transcript
    records: list[tuple[int, CallRecord]]
    _log: TranscriptLog
    _epochs: SessionEpochs
    _previous: PreviousRequest | None
    _rewrite: tuple[str, str] | None
    clock: Callable[[], Any]
    _project: Callable[..., Prompt]
    _explain: Callable[..., Any]
    _record: Callable[..., CallRecord]
    _side_call: Callable[..., tuple[CallRecord, CallResult, Any]]
    max_output_tokens: int

    def context_window(self) -> int | None:
        """The model's input window in tokens: the session's setting, else what the route's server
        reports (less the output budget), else the price table's (`harness.context_window`)."""
        if self.config.context_window is not None:
            return self.config.context_window
        route = self.route
        known = getattr(self, "_served_window", None)
        if known is None or known[0] is not route:
            known = (route, route_served_window(route))
            self._served_window = known
        if known[1] is not None:
            return input_window(known[1], self.max_output_tokens)
        entry = self.price_table.find(route.model)
        return entry.max_input_tokens if entry is not None else None

    @property
    def compacts_automatically(self) -> bool:
        """Whether the threshold and an overflow refusal compact (not with `compaction = "off"`;
        a manual `/compact` always does)."""
        return self.config.compaction != "off"

    def _needs_compaction(self, prompt: Prompt) -> bool:
        if not self.compacts_automatically or getattr(self, "native_compaction", False):
            return False  # off, or the provider compacts on its own (session_native)
        window = self.context_window()
        if window is None or self._previous is None:
            return False
        return needs_compaction(self._provider_tokens(prompt), window, threshold=self.config.compact_at)

    def _provider_tokens(self, prompt: Prompt) -> int:
        """The prompt's size in the provider's tokens: the projection's estimate, scaled by how the
        last call's reported prompt compared with its estimate."""
        last = next((r for _, r in reversed(self.records) if r.error is None and r.usage.prompt_tokens), None)
        previous = self._previous
        if last is None or previous is None or not previous.prompt.total_tokens:
            return prompt.total_tokens
        return round(prompt.total_tokens * last.usage.prompt_tokens / previous.prompt.total_tokens)

    def compact(self, cancel: threading.Event | None = None) -> CallRecord | None:
        """Summarize the history and go on with the summary and the recent turns. Returns the
        summary call's ledger row; None when there is nothing to compact. A failed summary call is
        recorded and raised (the transcript is unchanged)."""
        previous = self._previous
        window = self.context_window()
        keep = (window or 100_000) // 5
        plan = plan_compaction(self.transcript, keep_recent_tokens=keep)
        if plan is None or previous is None:
            return None
        real = self.transcript
        self.transcript = summary_transcript(real, sent=len(previous.prompt.messages))
        try:
            prompt = self._project()
        finally:
            self.transcript = real
        record, result, started_at = self._side_call(
            prompt, cancel, lambda: self.route.backend.call(prompt, max_tokens=self.max_output_tokens),
            name="hitrate-compaction", kind=COMPACTION_KIND,
        )
        summary = "".join(b.text for b in (result.assistant.content if result.assistant else ()) if isinstance(b, TextBlock))
        if not summary.strip():
            raise CallError("the summary request returned no text: the history was kept as it was", kind="bad_response")
        self.transcript = compacted(real, plan, summary)
        self._log.compaction(plan.keep_from, summary)
        self._previous = PreviousRequest(prompt=prompt, started_at=started_at)
        self._rewrite = ("compacted", "the history was compacted into a summary")
        return record
