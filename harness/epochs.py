"""A session's epochs, numbered across the whole session, resumes included.

An epoch is a stretch of requests with one model and one static head (tools, system prompt, docs);
a change of either loses the cached prefix. The projector numbers the epochs of the requests it
built; a resumed session has a fresh projector, so its earlier epochs are rebuilt from the call
rows (a new epoch wherever the model or the chained hashes of tools, system and docs differ from
the call before, the rule the projection applies live), and the projector's numbers are shifted
past them. The first request after a resume continues the last stored epoch unless its model or
head differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from hitrate.harness.summary import EpochLine
from hitrate.projection.epochs import head_changes
from hitrate.projection.prompt import Prompt
from hitrate.store.records import CallRecord

HEAD_SECTIONS = 3
"""tools, system, docs: the first three hashes of every call row."""

@dataclass(frozen=True)
class EpochView:
    """The epoch one request belongs to."""

    number: int
    started: bool
    """The request starts this epoch."""
    reason: str
    changes: list[str]


class SessionEpochs:
    def __init__(self) -> None:
        self.lines: list[EpochLine] = []
        """Each epoch as the summary shows it."""
        self.by_call: dict[str, int] = {}
        """The epoch number of each recorded call."""
        self._base = 0
        """Added to the projector's numbers (the epochs before a resume are not the projector's)."""
        self._resumed: tuple[str, tuple[str, ...], str | None] | None = None
        """(model, head hashes, effort) of the last stored request, until the first new one is compared."""

    @classmethod
    def restored(
        cls,
        calls: Sequence[CallRecord],
        labels: Mapping[str, str] | None = None,
        switches: Sequence[tuple[str, str]] = (),
        effort: str | None = None,
    ) -> "SessionEpochs":
        """The epochs of a stored session's calls (in the order they were made). `labels` gives the
        model spec of a wire model name, and `switches` the (wire model name, reason) of each stored
        model switch in order, to show epochs as the live session did."""
        labels = labels or {}
        pending = list(switches)
        epochs = cls()
        model: str | None = None
        head: tuple[str, ...] = ()
        for index, call in enumerate(calls, start=1):
            call_head = tuple(call.section_hashes[:HEAD_SECTIONS])
            if len(call_head) == HEAD_SECTIONS:
                parts = head_changes(model, call.model, head, call_head, chained=True)[1] if model is not None else []
                reason = "; ".join(parts) if parts else "session start"
                if parts and call.model != model:
                    # The stored switch to this model says why it happened, as the live epoch did.
                    while pending and pending[0][0] != call.model:
                        pending.pop(0)
                    if pending and pending[0][1]:
                        reason = f"{pending.pop(0)[1]}: {reason}"
                if model is None or parts:
                    epochs.lines.append(
                        EpochLine(
                            number=len(epochs.lines),
                            reason=reason,
                            model=labels.get(call.model, f"{call.backend}/{call.model}"),
                            first_step=index,
                            miss_tokens=call.miss_tokens,
                            miss_cost_usd=call.miss_cost_usd,
                        )
                    )
                model, head = call.model, call_head
            epochs.by_call[call.id] = max(0, len(epochs.lines) - 1)
        if model is not None:
            epochs._resumed = (model, head, effort)
        return epochs

    def view(self, prompt: Prompt, reason: str | None, effort: str | None = None) -> EpochView:
        """The session-wide epoch of `prompt` (just projected, asking for `effort`); `reason` is why
        an epoch may start."""
        if self._resumed is not None:
            model, head, stored_effort = self._resumed
            self._resumed = None
            count = len(self.lines)
            changes, parts = head_changes(model, prompt.model, head, prompt.section_hashes()[:HEAD_SECTIONS], chained=True,
                                          before_effort=stored_effort, after_effort=effort)
            if changes and changes[-1] not in ("model", "effort"):
                parts[-1] += " since the session was saved"
            if not changes:
                self._base = count - 1 - prompt.epoch.number
                return EpochView(count - 1, False, "", [])
            self._base = count - prompt.epoch.number
            described = "; ".join(parts)
            return EpochView(count, True, f"{reason}: {described}" if reason else described, changes)
        epoch = prompt.epoch
        return EpochView(self._base + epoch.number, prompt.epoch_started, epoch.reason, list(epoch.changes))

    def start(self, view: EpochView, model: str, step: int) -> None:
        self.lines.append(EpochLine(number=view.number, reason=view.reason, model=model, first_step=step))

    def record(self, call: CallRecord, view: EpochView) -> None:
        """Note the epoch of a recorded call; the first call of a new epoch says what it lost."""
        self.by_call[call.id] = view.number
        last = self.lines[-1] if self.lines else None
        if view.started and last is not None and last.number == view.number and last.miss_tokens is None and call.error is None:
            self.lines[-1] = last.model_copy(update={"miss_tokens": call.miss_tokens, "miss_cost_usd": call.miss_cost_usd})
