"""The numbers the TUI shows about a session's calls: per-call records and session totals.

Totals come from `hitrate.store.cost.aggregate`, so the TUI's hit ratio is the ledger's: Σread /
Σ(read + write + fresh), never a mean of per-call ratios.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from hitrate.store.cost import UsageTotals, aggregate
from hitrate.store.usage import WRITE_BUCKETS, Usage


class CallFigure(BaseModel):
    """One model call as the TUI shows it."""

    model_config = ConfigDict(frozen=True)

    number: int
    """1-based position of the call in the session."""
    backend: str
    model: str
    started_at: datetime
    usage: Usage
    cost_usd: float | None = None
    ttft_s: float | None = None
    latency_s: float | None = None
    miss_reason: str | None = None
    """Why the cache missed, as the projection labels it; None for a hit or a first call."""
    miss_tokens: int | None = None
    miss_cost_usd: float | None = None
    """What the miss cost compared with a hit."""
    error: str | None = None
    epoch: int = 0
    kind: str | None = None
    """"keepalive" for a warm-up that kept the cached prefix alive, "compaction" for a summary call;
    None for an agent call."""

    @property
    def missed(self) -> bool:
        return self.miss_reason is not None

    @property
    def keepalive(self) -> bool:
        return self.kind == "keepalive"

    @property
    def compaction(self) -> bool:
        """A summary call that compacted the history."""
        return self.kind == "compaction"


class SessionFigures:
    """The calls of one session, in order, with their totals."""

    def __init__(self, calls: Iterable[CallFigure] = ()) -> None:
        self.calls: list[CallFigure] = list(calls)

    def add(self, call: CallFigure) -> None:
        self.calls.append(call)

    def clear(self) -> None:
        self.calls.clear()

    @property
    def next_number(self) -> int:
        return len(self.calls) + 1

    @property
    def last(self) -> CallFigure | None:
        return self.calls[-1] if self.calls else None

    def totals(self) -> UsageTotals:
        """Sums over the calls that returned; a failed call's usage is unknown and would only
        add unknowns (the harness's session summary counts the same way)."""
        return aggregate((c.usage, c.cost_usd) for c in self.calls if c.error is None)

    @property
    def failed_calls(self) -> int:
        return sum(1 for c in self.calls if c.error is not None)

    def keepalive_calls(self) -> list[CallFigure]:
        return [c for c in self.calls if c.keepalive]

    def misses(self) -> list[CallFigure]:
        return [c for c in self.calls if c.missed]

    def miss_cost_usd(self) -> float | None:
        """Sum of what the misses cost over hits; None when no miss has a known cost."""
        known = [c.miss_cost_usd for c in self.misses() if c.miss_cost_usd is not None]
        return sum(known) if known else None


def fmt_tokens(n: int | None) -> str:
    """1234 -> "1.2k", 1_250_000 -> "1.25M"; None -> "?" (unknown, never shown as 0)."""
    if n is None:
        return "?"
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1_000_000:.2f}M"


def fmt_usd(value: float | None) -> str:
    """Dollars with enough digits for sub-cent calls; None (a model without a price, such as the
    local engine or a self-hosted server) -> "no price", never a made-up $0."""
    if value is None:
        return "no price"
    if value == 0:
        return "$0"
    if abs(value) < 0.01:
        return f"${value:.4f}"
    if abs(value) < 100:
        return f"${value:.3f}"
    return f"${value:,.2f}"


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


#: The four parts of a call's bar, in drawing order, and the usage buckets each one sums.
BAR_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("read", ("cache_read",)),
    ("write", WRITE_BUCKETS),
    ("fresh", ("fresh_input",)),
    ("output", ("output",)),
)


def bar_parts(usage: Usage) -> dict[str, int | None]:
    """read / write / fresh / output token counts; a part is None if any of its buckets is.

    When the provider gave the prompt's size but not its split (e.g. a vLLM server started
    without cached-token reporting), the tokens no known part accounts for come back as
    "unsplit", so the bar still shows the prompt's size without guessing where it went."""
    parts: dict[str, int | None] = {}
    for name, buckets in BAR_PARTS:
        values = [getattr(usage, b) for b in buckets]
        parts[name] = None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]
    prompt_parts = [parts[p] for p in ("read", "write", "fresh")]
    if None in prompt_parts and usage.prompt_total is not None:
        unsplit = max(0, usage.prompt_total - sum(n for n in prompt_parts if n is not None))
        output = parts.pop("output")
        parts["unsplit"] = unsplit
        parts["output"] = output  # drawn after the prompt, like the other bars
    return parts


def bar_cells(parts: dict[str, int | None], width: int) -> list[tuple[str, int]]:
    """Split `width` cells among the known parts in proportion to their tokens (largest
    remainder), giving every non-empty part at least one cell while room allows. Unknown parts
    get no cells; the caller marks them."""
    if width < 0:
        raise ValueError("a bar cannot have a negative width")
    known = [(name, n) for name, n in parts.items() if n]
    total = sum(n for _, n in known)
    if total == 0 or width == 0:
        return []
    floors: dict[str, int] = {}
    remainders: list[tuple[float, int, str]] = []
    for order, (name, n) in enumerate(known):
        exact = n * width / total
        floors[name] = int(exact)
        remainders.append((exact - int(exact), -order, name))
    left = width - sum(floors.values())
    for _, _, name in sorted(remainders, reverse=True)[:left]:
        floors[name] += 1
    # A part too small for a whole cell still gets one, taken from the widest part.
    for name, _ in known:
        if floors[name] == 0:
            widest = max(floors, key=lambda k: floors[k])
            if floors[widest] > 1:
                floors[widest] -= 1
                floors[name] = 1
    return [(name, floors[name]) for name, _ in known if floors[name] > 0]


def error_line(error: str) -> str:
    """The first line of a call's error, with a repeated reason said once
    ("cancelled: cancelled" -> "cancelled")."""
    first = error.splitlines()[0] if error else ""
    parts = [p.strip() for p in first.split(": ")]
    kept = [p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1]]
    return ": ".join(kept)


def one_line(text: str, limit: int = 60) -> str:
    """The first line of `text`, cut to `limit`, with … when anything was left out."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    more = " …" if len(first) > limit or "\n" in text.strip() else ""
    return first[:limit] + more
