"""Normalized token usage of one model call.

Every provider counts the prompt differently (see `hitrate.store.normalize`); this record is the
one shape the rest of hitrate reads. Each bucket is a count of tokens *billed one way*:

- `fresh_input`: prompt tokens billed at the model's base input rate (no cache involved, or a
  cache write that the provider bills as plain input, e.g. OpenAI up to GPT-5.5).
- `cache_write_5m` / `cache_write_30m` / `cache_write_1h` / `cache_write_12h`: prompt tokens
  written to the cache and billed at that TTL class's write rate (5m and 1h: Anthropic; 30m and
  12h: OpenAI GPT-5.6+, whose SDK reports `ttl_30m_tokens` / `ttl_12h_tokens`).
- `cache_read`: prompt tokens served from the cache.
- `output`: generated tokens, thinking/reasoning included.
- `reasoning`: the part of `output` that was thinking. A subset, never added to `output`.

`None` means the provider did not tell us. It is never replaced by 0: an unknown count must stay
visible in sums and ratios. A 0 means the provider's contract makes the count known to be zero
(e.g. a provider whose writes are never billed has 0 tokens in every write bucket).

Besides tokens, a call can carry charges that are not token buckets: per-request server-tool fees
(`web_search_requests`) and price modifiers the provider reports it applied (`inference_geo`,
`speed`, `service_tier`). `flags` names every contradiction the payload held and how it was read: a call is never
lost to its usage, it is stored with the best reading and the flag that says what was surprising.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

Count = Annotated[int, Field(ge=0)]

#: The bucket field names, in display order.
BUCKETS: tuple[str, ...] = (
    "fresh_input",
    "cache_write_5m",
    "cache_write_30m",
    "cache_write_1h",
    "cache_write_12h",
    "cache_read",
    "output",
    "reasoning",
)

#: The cache-write buckets, one per TTL class.
WRITE_BUCKETS: tuple[str, ...] = ("cache_write_5m", "cache_write_30m", "cache_write_1h", "cache_write_12h")

#: The buckets that make up the prompt (everything sent to the model).
PROMPT_BUCKETS: tuple[str, ...] = ("fresh_input", *WRITE_BUCKETS, "cache_read")

#: Per-request server-tool counts a `Usage` can carry (each may have a fee in the price table).
SERVER_TOOL_COUNTS: tuple[str, ...] = ("web_search_requests", "web_fetch_requests")


class Usage(BaseModel):
    """Token counts of one call, split into billing buckets. `None` = not reported."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fresh_input: Count | None = None
    """Prompt tokens billed at the base input rate."""
    cache_write_5m: Count | None = None
    """Prompt tokens written to the cache with a 5-minute TTL (Anthropic default)."""
    cache_write_30m: Count | None = None
    """Prompt tokens written to the cache with a 30-minute TTL (OpenAI GPT-5.6 and later)."""
    cache_write_1h: Count | None = None
    """Prompt tokens written to the cache with a 1-hour TTL (Anthropic extended TTL)."""
    cache_write_12h: Count | None = None
    """Prompt tokens written to the cache with a 12-hour TTL (OpenAI GPT-5.6+ extended TTL)."""
    cache_read: Count | None = None
    """Prompt tokens served from the cache."""
    output: Count | None = None
    """Generated tokens, thinking included."""
    reasoning: Count | None = None
    """Thinking tokens: a subset of `output`, recorded separately, never added to it."""
    prompt_total: Count | None = None
    """The whole prompt as the provider counted it, when known even though the split is not
    (e.g. a vLLM server that reports `prompt_tokens` but no cached count)."""
    web_search_requests: Count | None = None
    """Server-side web searches the provider ran for the call (Anthropic `server_tool_use`), each
    billed a per-request fee on top of the tokens."""
    web_fetch_requests: Count | None = None
    """Server-side web fetches (Anthropic `server_tool_use`); billed as tokens only."""
    inference_geo: str | None = None
    """Where the provider says inference ran (Anthropic `usage.inference_geo`: "global", "us")."""
    speed: str | None = None
    """The speed the provider says the call ran at (Anthropic `usage.speed`: "standard", "fast")."""
    service_tier: str | None = None
    """The service tier the provider says billed the call (Anthropic `usage.service_tier`:
    "standard", "priority", "batch")."""
    flags: tuple[str, ...] = ()
    """Contradictions or surprises in the provider's payload, each "code: detail", with how the
    buckets above were read despite them. Empty for a payload that held together."""

    @model_validator(mode="after")
    def _consistent(self) -> Usage:
        if self.reasoning is not None and self.output is not None and self.reasoning > self.output:
            raise ValueError(
                f"reasoning ({self.reasoning}) exceeds output ({self.output}); reasoning is a subset of output"
            )
        parts = self.prompt_parts_sum
        if parts is not None and self.prompt_total is not None and parts != self.prompt_total:
            raise ValueError(
                f"prompt buckets sum to {parts} but prompt_total is {self.prompt_total}: a field was mapped twice or not at all"
            )
        return self

    @property
    def cache_write_total(self) -> int | None:
        """All cache writes, any TTL; None if any TTL class is unknown."""
        return _sum_known(*(getattr(self, name) for name in WRITE_BUCKETS))

    @property
    def prompt_parts_sum(self) -> int | None:
        """fresh + writes + read; None if any part is unknown."""
        return _sum_known(*(getattr(self, name) for name in PROMPT_BUCKETS))

    @property
    def prompt_tokens(self) -> int | None:
        """The whole prompt: the sum of its buckets, else the provider's own total, else None."""
        parts = self.prompt_parts_sum
        return parts if parts is not None else self.prompt_total

    @property
    def total_tokens(self) -> int | None:
        """Prompt plus output; None if either is unknown."""
        return _sum_known(self.prompt_tokens, self.output)

    @property
    def has_cache_hit(self) -> bool | None:
        """Whether any prompt token came from the cache; None if the read count is unknown."""
        return None if self.cache_read is None else self.cache_read > 0

    @property
    def fully_classified(self) -> bool:
        """True when fresh, every write class and read are all known (the call can enter a hit ratio)."""
        return self.prompt_parts_sum is not None

    def buckets(self) -> dict[str, int | None]:
        """The bucket counts as a plain dict, in `BUCKETS` order."""
        return {name: getattr(self, name) for name in BUCKETS}

    @property
    def flagged(self) -> bool:
        """Whether the payload held a contradiction (see `flags`)."""
        return bool(self.flags)

    def flag_codes(self) -> list[str]:
        """The code part of each flag ("cache_write_split_short", ...), in order."""
        return [flag.split(":", 1)[0] for flag in self.flags]


def _sum_known(*values: int | None) -> int | None:
    if any(v is None for v in values):
        return None
    return sum(values)  # type: ignore[arg-type]
