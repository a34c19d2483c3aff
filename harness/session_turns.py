"""What a session does with a reply beyond appending it, and the settings each call is sent with:
the output budget, the reasoning effort (a change is an epoch), a paused turn continued, a refused
turn taken out of the history.

A mixin of `Session`, kept apart so the session module stays about one model call; it relies only
on the session attributes declared below."""

from __future__ import annotations

from typing import Callable

from hitrate.harness.epochs import EpochView
from hitrate.harness.router import Route
from hitrate.harness.session_inputs import SessionConfig
from hitrate.harness.transcript_log import TranscriptLog
from hitrate.harness.wire.effort import Effort, default_output_tokens
from hitrate.projection.explain import MissExplanation
from hitrate.projection.transcript import AssistantMessage, Transcript, UserMessage
from hitrate.store.prices import PriceTable


def effort_miss(explanation: MissExplanation, epoch: EpochView) -> MissExplanation:
    """A miss the rules cannot explain right after an effort change, put down to it: the bytes did
    not change, yet less was read (Anthropic: a change of thinking settings invalidates cached
    message prefixes)."""
    if epoch.started and "effort" in epoch.changes and explanation.reason == "unknown":
        return explanation.model_copy(update={
            "reason": "effort_changed", "label": "effort_changed",
            "detail": "the reasoning effort changed; the provider keys cached messages on thinking settings",
        })
    return explanation


class SessionTurns:
    """Output budget, effort, paused and refused turns of a session."""

    route: Route
    config: SessionConfig
    price_table: PriceTable
    transcript: Transcript
    effort: Effort | None
    _log: TranscriptLog
    _epoch_reason: str | None
    _append: Callable[[UserMessage | AssistantMessage], None]

    @property
    def max_output_tokens(self) -> int:
        """`max_tokens` of the next call: the configured one, else the model's default, which leaves
        room for thinking on models that think by default, within the model's own output limit."""
        if self.config.max_output_tokens is not None:
            return self.config.max_output_tokens
        entry = self.price_table.find(self.route.model)
        return default_output_tokens(
            thinks_by_default=entry is not None and entry.thinks_by_default,
            max_output_tokens=entry.max_output_tokens if entry is not None else None,
        )

    def set_effort(self, effort: Effort | None, reason: str = "effort changed by the user") -> None:
        """Ask for another reasoning effort from the next call on. Like a model switch, the next
        prompt starts a new epoch (a provider may key its cache on thinking settings), and its
        first call's miss is recorded against it."""
        if effort == self.effort:
            return
        self.effort = effort
        self.route.backend.effort = effort
        self._epoch_reason = reason
        self._log.effort(effort, reason)

    @property
    def continuing(self) -> bool:
        """The transcript ends with an assistant turn the model is to go on with (Anthropic
        `pause_turn`): the next request sends it back as it is, with no new user turn."""
        messages = self.transcript.messages
        return bool(messages) and isinstance(messages[-1], AssistantMessage)

    def rewind(self, keep: int, reason: str) -> None:
        """Take the turns from message `keep` on out of the history, stored so a resume does the
        same. The next request's history is a prefix of the last one's, so its cache still reads."""
        self.transcript = Transcript(messages=self.transcript.messages[:keep])
        self._log.rewind(keep, reason)

    def _add_reply(self, reply: AssistantMessage) -> AssistantMessage:
        """Add the model's reply to the transcript; returns the assistant turn it is now part of
        (itself, or a paused turn it went on with: one assistant turn, as the provider sees it)."""
        if not self.continuing:
            self._append(reply)
            return reply
        last = self.transcript.messages[-1]
        assert isinstance(last, AssistantMessage)
        self._log.continued(reply)
        merged = AssistantMessage(content=last.content + reply.content)
        self.transcript = Transcript(messages=self.transcript.messages[:-1] + (merged,))
        return merged
