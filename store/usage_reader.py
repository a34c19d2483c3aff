"""Reading a raw usage payload that may be malformed or contradict itself, without ever raising.

A provider billed the call whatever its usage block says, so a surprising block must not cost the
call its ledger row. `UsageReader` reads counts leniently (a value that is not a whole,
non-negative number becomes unknown), applies the documented repairs, and records each
contradiction as a flag "code: detail" that ends up in `Usage.flags`. The normalizers in
`hitrate.store.normalize` and `hitrate.store.normalize_anthropic` are built on it.

Flag codes (one place for their meaning):

- `usage_not_object`: the payload (or a nested block) is not a JSON object; nothing could be read.
- `bad_count`: a count is not a whole, non-negative number; it is read as unknown.
- `bad_field`: a non-count field has the wrong type (e.g. `inference_geo` not a string); ignored.
- `cached_exceeds_prompt`: a prompt count that should include the cached tokens is smaller than
  them; the prompt count is read as leaving them out (fresh = the prompt count).
- `cache_write_exceeds_uncached`: cached + written is more than the prompt; writes are capped at
  the uncached remainder and fresh is 0.
- `cache_write_split_short` / `cache_write_split_exceeds_total`: a TTL split that does not add up
  to its write total; the total wins, and a remainder is billed at the default TTL's rate.
- `unexpected_cache_write_tokens`: billed writes reported for a model whose writes are free; they
  are billed as fresh input, as the price table says.
- `prompt_split_mismatch`: a hit + miss split that does not add up to the prompt count; the split
  (what is billed) is kept.
- `reasoning_exceeds_output`: more reasoning than output; see each normalizer for the reading.
- `total_below_prompt`: `total_tokens` smaller than the prompt count; ignored.
- `iteration_not_billed_here`: a usage iteration of a kind this ledger does not price.
- `inconsistent_buckets`: the buckets still contradicted each other after the repairs; the
  provider's own prompt total and the reasoning count are dropped (unknown).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from hitrate.store.usage import Usage

UNREADABLE_KEY = "unreadable_usage"
"""Where `hitrate.store.normalize.as_raw_usage` keeps a usage payload that was not a JSON object."""


class UsageReader:
    """Collects the flags of one payload while its fields are read."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.flags: list[str] = []

    def flag(self, code: str, detail: str) -> None:
        self.flags.append(f"{code}: {self.api}: {detail}")

    # ---- reading fields ------------------------------------------------------------------------

    def mapping(self, payload: Any, what: str) -> Mapping[str, Any] | None:
        """`payload` as a mapping (SDK objects are dumped), or None with a flag."""
        if payload is not None and not isinstance(payload, Mapping) and hasattr(payload, "model_dump"):
            try:
                payload = payload.model_dump()
            except Exception as exc:  # a half-built SDK object: report it, never crash the call
                self.flag("usage_not_object", f"{what} could not be read ({type(exc).__name__})")
                return None
        if not isinstance(payload, Mapping):
            self.flag("usage_not_object", f"{what} is {type(payload).__name__}, not a JSON object")
            return None
        if UNREADABLE_KEY in payload:
            # What `as_raw_usage` stored for a payload that was not an object.
            self.flag("usage_not_object", f"{what} arrived as {payload[UNREADABLE_KEY]!r}, not a JSON object")
        return payload

    def sub(self, u: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        """A nested block; absent or null is empty, anything else not an object is flagged."""
        value = u.get(key)
        if value is None:
            return {}
        found = self.mapping(value, key)
        return found if found is not None else {}

    def count(self, u: Mapping[str, Any], key: str, where: str = "usage") -> int | None:
        """A token count, or None when absent, null, or not a whole non-negative number."""
        value = u.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.flag("bad_count", f"{where}.{key} = {value!r} is not a token count; read as unknown")
            return None
        if isinstance(value, float) and not value.is_integer():
            self.flag("bad_count", f"{where}.{key} = {value!r} is not a whole number; read as unknown")
            return None
        if value < 0:
            self.flag("bad_count", f"{where}.{key} = {value} is negative; read as unknown")
            return None
        return int(value)

    def count_alias(self, u: Mapping[str, Any], camel: str, snake: str) -> int | None:
        value = self.count(u, camel)
        return value if value is not None else self.count(u, snake)

    def text(self, u: Mapping[str, Any], key: str, where: str = "usage") -> str | None:
        value = u.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.flag("bad_field", f"{where}.{key} = {value!r} is not a string; ignored")
            return None
        # A blank value says nothing (the provider's default applies).
        return value.strip() or None

    # ---- repairs shared by the APIs that count cached tokens inside the prompt ------------------

    def inclusive_split(
        self, prompt: int | None, cached: int | None, prompt_name: str, cached_name: str
    ) -> tuple[int | None, int | None, int | None]:
        """(fresh, read, prompt_total) for a prompt count that includes the cached tokens."""
        if prompt is None or cached is None:
            return None, cached, prompt
        if cached <= prompt:
            return prompt - cached, cached, prompt
        self.flag(
            "cached_exceeds_prompt",
            f"{cached_name}={cached} > {prompt_name}={prompt}; the prompt count is read as leaving the "
            f"cached tokens out (fresh = {prompt}, read = {cached})",
        )
        return prompt, cached, None

    def output_with_reasoning(
        self, output: int | None, reasoning: int | None, implied: int | None = None
    ) -> int | None:
        """Output when `reasoning` exceeds it: thinking was counted outside the output count, so the
        billed output is the total's remainder (`implied`) when that covers the reasoning, else
        output + reasoning."""
        if reasoning is None or output is None or reasoning <= output:
            return output
        if implied is not None and implied >= reasoning:
            repaired, how = implied, "total_tokens - prompt_tokens"
        else:
            repaired, how = output + reasoning, "output + reasoning"
        self.flag(
            "reasoning_exceeds_output",
            f"reasoning={reasoning} > output={output}; thinking read as outside the output count, "
            f"output = {how} = {repaired}",
        )
        return repaired

    def complete_pair(
        self,
        total: tuple[str, int | None],
        first: tuple[str, str, int | None],
        second: tuple[str, str, int | None],
    ) -> tuple[int | None, int | None]:
        """The two TTL parts of a write total, each (TTL, field name, count). The first part is the
        default TTL: a remainder the split leaves over is billed there. The total always wins: it is
        what the provider bills (and, in a stream, the final cumulative count)."""
        total_name, whole = total
        (ttl_a, name_a, a), (ttl_b, name_b, b) = first, second
        if whole is None:
            return a, b
        if a is None and b is None:
            return whole, 0
        if a is None or b is None:
            given, given_name = (b, name_b) if a is None else (a, name_a)
            assert given is not None
            if given > whole:
                self.flag(
                    "cache_write_split_exceeds_total",
                    f"{given_name}={given} > {total_name}={whole}; capped at the total",
                )
                given = whole
            rest = whole - given
            return (rest, given) if a is None else (given, rest)
        split = a + b
        if split == whole:
            return a, b
        if split < whole:
            self.flag(
                "cache_write_split_short",
                f"{total_name}={whole} but the TTL split ({a} {ttl_a} + {b} {ttl_b}) covers {split}; the "
                f"remaining {whole - split} are billed at the {ttl_a} rate (writes without a split)",
            )
            return a + (whole - split), b
        kept_b = min(b, whole)
        self.flag(
            "cache_write_split_exceeds_total",
            f"the TTL split ({a} {ttl_a} + {b} {ttl_b}) exceeds {total_name}={whole}; the total is billed, "
            f"{kept_b} at {ttl_b} and {whole - kept_b} at {ttl_a}",
        )
        return whole - kept_b, kept_b

    # ---- the result --------------------------------------------------------------------------

    def build(self, **fields: Any) -> Usage:
        """The `Usage` with every flag collected. Never raises: buckets that still contradict each
        other lose the provider's prompt total and the reasoning count (flagged), and as a last
        resort every bucket is unknown."""
        try:
            return Usage(**fields, flags=tuple(self.flags))
        except ValidationError as exc:
            self.flag("inconsistent_buckets", f"{exc.errors()[0]['msg']}; prompt_total and reasoning dropped")
        try:
            return Usage(**{**fields, "prompt_total": None, "reasoning": None}, flags=tuple(self.flags))
        except ValidationError as exc:
            self.flag("inconsistent_buckets", f"{exc.errors()[0]['msg']}; every bucket read as unknown")
        return Usage(flags=tuple(self.flags))
