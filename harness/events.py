"""Typed events the agent emits while it works: the terminal printer, `--json` and the TUI all read
the same stream. Each event is a pydantic model with a `type` tag, so one JSON line per event is a
complete, self-describing record.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Literal, Union

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from hitrate.store.usage import Usage


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str


class SessionStarted(_Event):
    type: Literal["session_started"] = "session_started"
    model: str
    """The model spec label (e.g. anthropic/claude-sonnet-5)."""
    workspace: str
    task: str


class EpochStarted(_Event):
    """The static head or the model changed: the cached prefix is lost from here on."""

    type: Literal["epoch_started"] = "epoch_started"
    number: int
    reason: str
    changes: list[str]
    model: str


class CallStarted(_Event):
    type: Literal["call_started"] = "call_started"
    step: int
    model: str
    prompt_tokens_estimate: int


class TextDelta(_Event):
    type: Literal["text_delta"] = "text_delta"
    step: int
    text: str


class CallRetrying(_Event):
    """An attempt failed in a way that may pass; text streamed by it is void."""

    type: Literal["call_retrying"] = "call_retrying"
    step: int
    attempt: int
    delay_s: float
    error: str


CALL_FACTS: tuple[str, ...] = (
    "started_at", "usage", "cost_usd", "miss_reason", "miss_tokens", "miss_cost_usd", "ttft_s", "latency_s", "error", "kind",
)
"""The fields every view of one recorded call shows (the event, the TUI's call bars), named as on
its ledger row: views take them with `call_facts`, never field by field."""


def call_facts(source: Any) -> dict[str, Any]:
    """The `CALL_FACTS` of a ledger row (`CallRecord`) or of an event that carries them."""
    return {name: getattr(source, name) for name in CALL_FACTS}


class CallRecorded(_Event):
    """One model call written to the ledger (successful or failed)."""

    type: Literal["call_recorded"] = "call_recorded"
    step: int
    call_id: str
    model: str
    started_at: AwareDatetime
    """When the request was sent (UTC), as in the ledger row: a cache entry's TTL counts from it."""
    usage: Usage
    cost_usd: float | None
    miss_reason: str | None
    """None when the call read what it could from the cache."""
    miss_tokens: int | None
    miss_cost_usd: float | None
    ttft_s: float | None
    latency_s: float | None
    stop_reason: str | None
    error: str | None = None
    epoch: int
    kind: str | None = None
    """"keepalive" for a warm-up that re-sent the last request to keep its cache alive (not an
    agent step: `step` is 0 and the transcript is unchanged); None for an agent call."""


class ToolCallStarted(_Event):
    type: Literal["tool_call_started"] = "tool_call_started"
    step: int
    call_id: str
    name: str
    arguments: str


class ToolCallFinished(_Event):
    type: Literal["tool_call_finished"] = "tool_call_finished"
    step: int
    call_id: str
    name: str
    is_error: bool
    content: str
    """The result text sent to the model (may be long; printers shorten it)."""
    metadata: dict[str, Any] = Field(default_factory=dict)


class AssistantTurn(_Event):
    """The assistant turn appended to the transcript (the model's, or a replayed one)."""

    type: Literal["assistant_turn"] = "assistant_turn"
    step: int
    text: str
    tool_calls: list[str]
    replayed: bool


HarnessTurnKind = Literal["repair", "nudge", "format_error"]


class HarnessTurn(_Event):
    """A turn the harness added after the model's reply (`harness.repair`, `harness.text_protocol`):
    a repair turn for a reply that looked like a call but was none, a nudge after the same failing
    call repeated, or a format-error turn of the text tool protocol. Appended, never inserted."""

    type: Literal["harness_turn"] = "harness_turn"
    step: int
    kind: HarnessTurnKind
    reason: str
    """What prompted it, in a few words (e.g. "a call of `deep_merge`, which is not one of your tools")."""
    text: str
    """What the model was told."""


class Finished(_Event):
    type: Literal["finished"] = "finished"
    status: str
    """end_turn, max_steps, max_cost, max_wall, max_tokens (reply cut off at the output limit), cancelled, error."""
    detail: str = ""
    summary: dict[str, Any]
    """`SessionSummary.model_dump()`."""
    harness_turns: dict[str, int] = Field(default_factory=dict)
    """How many turns of each `HarnessTurnKind` the harness added during the run."""


AgentEvent = Annotated[
    Union[
        SessionStarted,
        EpochStarted,
        CallStarted,
        TextDelta,
        CallRetrying,
        CallRecorded,
        ToolCallStarted,
        ToolCallFinished,
        AssistantTurn,
        HarnessTurn,
        Finished,
    ],
    Field(discriminator="type"),
]

EventSink = Callable[[BaseModel], None]


def discard(_: BaseModel) -> None:
    """A sink that drops every event."""


class EventList:
    """A sink that keeps every event (tests, the demo's summary)."""

    def __init__(self) -> None:
        self.events: list[BaseModel] = []

    def __call__(self, event: BaseModel) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def jsonable_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Tool metadata for an event (`ToolCallFinished.metadata`): JSON-safe values only (paths and the like as strings)."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, (str, int, float, bool)) or item is None:
            out[key] = item
        elif isinstance(item, (list, tuple)) and all(isinstance(i, (str, int, float, bool)) for i in item):
            out[key] = list(item)
        else:
            out[key] = str(item)
    return out
