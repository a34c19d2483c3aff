"""What the app needs from an agent, and the plain data that crosses that seam.

`AgentLink` is the one seam between the Textual app and the harness. `run_turn` runs in the
app's thread worker and reports through `post` only; every other method is called from the app's
event loop between turns.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from hitrate.harness.events import call_facts
from hitrate.harness.keepalive import KeepAliveDecision
from hitrate.store.cost import cost
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord
from hitrate.store.usage import BUCKETS, Usage
from hitrate.tui.figures import CallFigure, fmt_tokens, fmt_usd
from hitrate.tui.messages import AgentMessage
from hitrate.projection.caching.ttl import ttl_seconds

Post = Callable[[AgentMessage], None]
Approve = Callable[[str, dict[str, Any]], bool]


class ReplayItem(BaseModel):
    """One thing a resumed session shows again, in transcript order."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["user", "assistant", "tool"]
    text: str = ""
    """user / assistant text; for tools, the result text."""
    call_id: str = ""
    tool: str = ""
    args: dict[str, Any] = {}
    is_error: bool = False
    metadata: dict[str, Any] = {}


class SessionInfo(BaseModel):
    """A session in the /resume list."""

    model_config = ConfigDict(frozen=True)

    id: str
    started_at: datetime
    model: str | None
    calls: int
    cost_usd: float | None
    first_prompt: str = ""


class ResumedSession(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    items: list[ReplayItem]
    calls: list[CallFigure]
    workspace: str | None = None
    """Where the resumed session works (the one it recorded, when that folder still exists)."""
    notes: list[str] = []
    """What could not be restored as recorded, and what was done instead."""


class AgentLink(Protocol):
    """An agent session the TUI drives."""

    @property
    def provider(self) -> str:
        """The backend family of the current model spec: anthropic, openai, local, ..."""

    @property
    def model(self) -> str:
        """The model name sent on the wire (local: the hub id or path)."""

    @property
    def model_label(self) -> str:
        """The spec as the user would type it again."""

    @property
    def session_id(self) -> str: ...

    def run_turn(self, prompt: str, post: Post, cancel: threading.Event, approve: Approve) -> None:
        """Run the agent on one user prompt until it stops; blocks; reports only through `post`.
        Returns early, keeping everything recorded so far, once `cancel` is set."""

    def check_model(self, spec: str) -> tuple[str, str, str]:
        """(provider, model, label) of a spec, or raise ValueError saying what is wrong with it."""

    def switch_model(self, spec: str) -> None:
        """Use `spec` from the next call on (a new epoch); raise ValueError if it cannot be used."""

    @property
    def effort(self) -> str | None:
        """The reasoning effort every call asks for; None: the model's own default."""

    def set_effort(self, effort: str | None) -> None:
        """Ask for `effort` from the next call on (a change is a new cache epoch)."""

    def new_session(self) -> None:
        """Start an empty session with the same model, tools and workspace."""

    def recent_sessions(self, limit: int = 10) -> list[SessionInfo]: ...

    def resume(self, session_id: str, *, keep_model: bool = False, keep_workspace: bool = False) -> ResumedSession:
        """Continue session `session_id` from the ledger, on the model and in the workspace it last
        used (unless told to keep the current ones); raise KeyError if there is none."""

    def keepalive(self, now: datetime) -> KeepAliveDecision:
        """Whether to warm the cached prefix at `now`, and why (`hitrate.harness.keepalive`)."""

    @property
    def keepalive_enabled(self) -> bool:
        """Whether keep-alive warm-ups are switched on."""

    def set_keepalive(self, on: bool) -> None:
        """Turn keep-alive warm-ups on or off."""

    def context_window(self) -> tuple[int | None, float]:
        """(the model's input window in tokens, None when unknown; the share of it the session
        compacts at), for the context gauge."""

    def idle_compaction_due(self, now: datetime) -> bool:
        """Whether the idle session should compact at `now`, before its cached prefix expires, rather
        than be warmed (`hitrate.harness.idle_compaction`); `warm_up` then compacts instead."""

    def warm_up(self, post: Post) -> None:
        """Send a keep-alive warm-up (or the idle compaction) if one is still due; blocks; reports the recorded call through
        `post`. Gives way to a turn: `run_turn` stops a warm-up in flight and waits for it."""

    def compact(self, post: Post) -> str:
        """Compact the session's history now (blocks; the summary call is reported through `post`);
        returns what happened, in a sentence."""

    def close(self) -> None: ...


def figure_from_record(record: CallRecord, number: int, epoch: int = 0) -> CallFigure:
    return CallFigure(number=number, backend=record.backend, model=record.model, epoch=epoch, **call_facts(record))


class SwitchEstimate(BaseModel):
    """What a model switch costs in cache: the prefix the old model had cached must be sent again."""

    model_config = ConfigDict(frozen=True)

    from_label: str
    to_label: str
    prefix_tokens: int | None
    """The prompt of the last call: what the next call would otherwise have read from cache."""
    resend_usd: float | None
    """The prefix on the new model, as a cache write where writes are billed, else as fresh input."""
    resend_as: str
    stay_usd: float | None
    """The same prefix read from cache on the current model (if it is still warm)."""

    @property
    def extra_usd(self) -> float | None:
        if self.resend_usd is None or self.stay_usd is None:
            return None
        return self.resend_usd - self.stay_usd

    def message(self) -> str:
        head = f"Switching {self.from_label} → {self.to_label} starts a new cache epoch."
        if not self.prefix_tokens:
            return head + " Nothing is cached in this session yet, so it costs nothing extra."
        lines = [
            head,
            f"The {fmt_tokens(self.prefix_tokens)}-token prefix cached for the current model cannot be "
            f"read by the new one: the next call sends all of it again.",
            f"  on the new model ({self.resend_as}): ≈ {fmt_usd(self.resend_usd)}",
            f"  staying (cache read): ≈ {fmt_usd(self.stay_usd)}",
        ]
        if self.extra_usd is not None:
            lines.append(f"  extra for the switch: ≈ {fmt_usd(self.extra_usd)}")
        return "\n".join(lines)


def estimate_switch(
    last: CallFigure | None,
    from_model: str,
    from_label: str,
    to_label: str,
    to_model: str,
    to_provider: str,
    at: datetime,
    prices: PriceTable | None = None,
) -> SwitchEstimate:
    """Price the epoch a switch starts, from the last call's prompt size. A model without a price
    (the local engine, a self-hosted server) gives None, never a guessed $0."""
    prices = prices or PriceTable.default()
    prefix = last.usage.prompt_tokens if last is not None else None
    if not prefix or last is None:
        return SwitchEstimate(from_label=from_label, to_label=to_label, prefix_tokens=prefix, resend_usd=0.0, resend_as="—", stay_usd=0.0)
    zero = dict.fromkeys(BUCKETS, 0)
    stay = cost(Usage(**{**zero, "cache_read": prefix}), from_model, at, prices).total
    entry = None if to_provider in ("local", "openai-compat") else prices.find(to_model)
    minimum = entry.min_cacheable_tokens if entry is not None else None
    if minimum and prefix < minimum:
        # A prefix below the model's minimum is silently not cached (no write is billed): all of
        # it is fresh input on every call until the conversation grows past the minimum.
        usage = Usage(**{**zero, "fresh_input": prefix})
        resend_as = f"fresh input: below its {minimum:,}-token cache minimum, not cached"
    elif entry is not None and entry.writes_billed and entry.write_ttls:
        # The shortest TTL class is what the planner writes by default.
        ttl = min(entry.write_ttls, key=ttl_seconds)
        usage = Usage(**{**zero, f"cache_write_{ttl}": prefix})
        resend_as = f"{ttl} cache write"
    else:
        usage = Usage(**{**zero, "fresh_input": prefix})
        resend_as = "fresh input"
    resend = cost(usage, to_model, at, prices).total if entry is not None else None
    if entry is None and to_provider in ("local", "openai-compat"):
        resend_as = "recomputed by the server, no price"
    return SwitchEstimate(
        from_label=from_label,
        to_label=to_label,
        prefix_tokens=prefix,
        resend_usd=resend,
        resend_as=resend_as,
        stay_usd=stay,
    )
