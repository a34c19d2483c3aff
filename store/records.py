"""Rows of the ledger as pydantic models: runs, tasks, sessions, model calls and transcript entries."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from hitrate.store.usage import Usage


CallState = Literal["pending", "done"]

INTERRUPTED_CALL_ERROR = "interrupted: the process ended before this call finished (its usage is unknown)"
"""The error a row carries while it is pending: what it says if its process never completes it."""


def new_id() -> str:
    """A 32-hex-digit id in UUIDv7 layout: millisecond time first (rows written together sort
    and index together), then 74 random bits, so ids from parallel processes never collide."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version 7
    value |= ((rand >> 64) & 0xFFF) << 64
    value |= 0b10 << 62  # RFC 4122 variant
    value |= rand & ((1 << 62) - 1)
    return f"{value:032x}"


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class SectionMark(BaseModel):
    """A cache mark placed on one block of a section (Anthropic `cache_control`, OpenAI breakpoint)."""

    model_config = ConfigDict(extra="forbid")

    block: int = Field(ge=0)
    """Index of the marked block within the section (not within the message)."""
    ttl: str
    """TTL class of the mark: "5m", "1h", "30m"."""


class CallSection(BaseModel):
    """One section of a call's prompt as the cache sees it: enough to replay the request through
    another provider's caching rules without the prompt's bytes."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    """"tools", "system", "docs", "history" or "tail"."""
    index: int = Field(ge=0)
    """Index among sections of the same kind."""
    hash: str
    """Chained hash: equal hashes mean equal bytes from the start of the prompt through here."""
    tokens: int = Field(ge=0)
    """Token count (estimate) of the section."""
    role: str | None = None
    """history / tail: the role of the message the section belongs to ("user", "assistant")."""
    block_tokens: list[int] = []
    """Token count of each block of the section."""
    positions: list[int] = []
    """Each block's cache-lookback position from the start of the prompt (a run of tool calls or
    of tool results shares one)."""
    markable: list[bool] = []
    """Whether a cache mark may sit on each block."""
    marks: list[SectionMark] = []
    """Marks the request carried on this section's blocks."""


class CallRecord(BaseModel):
    """One model call: who made it, what the prompt was made of, what it used and cost."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id)
    """Unique id of the call (primary key; a second insert with the same id is an error)."""
    run_id: str | None = None
    task_id: str | None = None
    session_id: str | None = None
    backend: str
    """Which backend served it: "anthropic", "openai", "deepseek", "gemini", "vllm", "local", ..."""
    model: str
    """The model name as sent to the backend."""
    started_at: AwareDatetime
    """When the request was sent (timezone-aware; prices can depend on the time of day)."""
    ttft_s: float | None = Field(None, ge=0)
    """Seconds from sending to the first streamed token."""
    latency_s: float | None = Field(None, ge=0)
    """Seconds from sending to the end of the response."""
    section_hashes: list[str] = []
    """Chained hashes of the prompt's sections, in order (for miss explanation)."""
    usage: Usage = Usage()
    """Normalized token buckets; stored as one column per bucket."""
    raw_usage: dict[str, Any] | None = None
    """The provider's usage payload exactly as received."""
    price_snapshot_id: str | None = None
    """Id of the price snapshot `cost_usd` was computed with."""
    cost_usd: float | None = None
    """Cost of the call; None when unpriced or when token counts are unknown."""
    miss_reason: str | None = None
    """Label of why the cache missed (e.g. "ttl_expired", "prefix_changed(system, ...)")."""
    miss_tokens: int | None = Field(None, ge=0)
    """Prompt tokens the miss made the call pay for as writes or fresh input."""
    miss_cost_usd: float | None = None
    """What the miss cost compared with a hit."""
    error: str | None = None
    """Error text of a failed call (its usage may be partly or wholly unknown)."""
    layout: str | None = None
    """Prompt layout tag for evals (e.g. "cache_aware", "naive")."""
    cache_mode: str | None = None
    """Cache mode tag for evals (e.g. "cold", "warm")."""
    sections: list[CallSection] | None = None
    """The prompt's sections with token counts, block layout and marks (for what-if replay);
    None for calls recorded before the ledger stored them."""
    kind: str | None = None
    """What the call was for when it was not an agent step: "keepalive" (a warm-up that re-sent
    the last request to keep its cached prefix alive). None for an ordinary call."""
    attempt: int = Field(1, ge=1)
    """Which attempt of its call this row is: 1 for the first request, n for the (n-1)-th retry."""
    retry_of: str | None = None
    """The id of the first attempt's row when this row is a retry; None on a first attempt."""
    state: CallState = "done"
    """"pending" from just before the request is sent until the row is completed; "done" after
    (whether the call returned or failed). A row still pending after its process ended is a call
    that was interrupted: its `error` says so and its usage is unknown."""

    @property
    def interrupted(self) -> bool:
        """Whether the row was never completed (its process ended during the call)."""
        return self.state == "pending"


class RunRecord(BaseModel):
    """One run: an eval run or an interactive sitting."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id)
    started_at: AwareDatetime = Field(default_factory=utc_now)
    finished_at: AwareDatetime | None = None
    label: str | None = None
    status: str = "running"
    """"running" until finished; then e.g. "finished", "failed", "interrupted"."""
    config: dict[str, Any] = {}


class TaskRecord(BaseModel):
    """One task within a run, with its outcome once finished."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    name: str
    started_at: AwareDatetime = Field(default_factory=utc_now)
    finished_at: AwareDatetime | None = None
    outcome: str | None = None
    """e.g. "passed", "failed", "error", "timeout"; None while the task runs."""
    detail: dict[str, Any] = {}


class SessionRecord(BaseModel):
    """One agent session (one transcript)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    task_id: str | None = None
    started_at: AwareDatetime = Field(default_factory=utc_now)
    backend: str | None = None
    model: str | None = None
    label: str | None = None
    workspace: str | None = None
    """The folder the session worked in (None for sessions recorded before it was stored)."""
    model_spec: str | None = None
    """The model spec the session started with, as the user would type it again."""


class MessageRecord(BaseModel):
    """One entry of a session's stored transcript. The store keeps `body` as opaque JSON text; the
    harness decides what the kinds mean."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(min_length=1)
    seq: int = Field(ge=0)
    """Position in the session's transcript, from 0, without gaps."""
    kind: str = Field(min_length=1)
    """What `body` holds, e.g. "user" / "assistant" (a message), "context" (a block added to the
    message before it once sent), "model" (the session moved to another model)."""
    body: str
    """The entry as JSON text, stored byte for byte."""
    recorded_at: AwareDatetime = Field(default_factory=utc_now)
