"""What the agent is doing right now, for how long, and how many tokens it has streamed: the status
bar's first segment, and the one it keeps longest.

A pure model: the app sets what happens (a call sent, text arriving, a tool running) and passes
`now` when it draws, so the elapsed time ticks with the app's clock and tests can freeze it.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from hitrate.projection.canonical import estimate_tokens
from hitrate.tui.figures import fmt_tokens


def format_elapsed(seconds: float) -> str:
    """"12s", "3m05s", "1h02m": short enough for an 80-column status bar."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def host_of(label: str) -> str:
    """Who a request waits for, in a few characters: the server of an `…@<url>` spec
    ("127.0.0.1:8000"), else the provider ("anthropic")."""
    _, at, url = label.partition("@")
    if at:
        return urlsplit(url).netloc or url
    return label.partition("/")[0] or label


class Activity(BaseModel):
    """One state of the agent. `what` is a few words ("waiting for claude-sonnet-4-6", "writing",
    "running shell", "awaiting approval: shell", "compacting", "ready")."""

    model_config = ConfigDict(frozen=True)

    what: str
    short: str | None = None
    """A shorter `what` for a narrow bar ("waiting" for "waiting for claude-sonnet-4-6")."""
    since: datetime | None = None
    """When this state began; None for a state without a clock (ready)."""
    step: int | None = None
    streamed_chars: int = 0
    """Characters of reply text streamed in this call (tokens are estimated from them)."""
    prompt_tokens: int | None = None
    """The estimated size of the request being sent (shown while waiting for the first token)."""

    @property
    def streamed_tokens(self) -> int:
        # bytes / 4, the projection's estimate: what is on screen is an estimate, and says so (~).
        return estimate_tokens("x" * self.streamed_chars) if self.streamed_chars else 0

    def forms(self, now: datetime) -> list[tuple[str, bool]]:
        """The activity, longest first, each with whether giving it up for the next form loses
        only a detail (the step number, the request's size): a narrow bar shows less of the
        activity rather than a cut-off sentence, and what it keeps longest is what the agent is
        doing, for how long, and the tokens streamed so far."""
        if self.since is None:
            texts = [self.what, self.short or self.what]
            return [(text, False) for text in dict.fromkeys(texts)]
        elapsed = format_elapsed((now - self.since).total_seconds())
        step = f"step {self.step} · " if self.step is not None else ""
        tokens = f" · ~{fmt_tokens(self.streamed_tokens)} tok" if self.streamed_chars else ""
        sent = f" · ~{fmt_tokens(self.prompt_tokens)} in" if self.prompt_tokens and not self.streamed_chars else ""
        detailed = [f"{step}{self.what} · {elapsed}{tokens}{sent}", f"{step}{self.what} · {elapsed}{tokens}"]
        core = [f"{self.what} · {elapsed}{tokens}", f"{self.short or self.what} · {elapsed}{tokens}"]
        forms = [(text, True) for text in dict.fromkeys(detailed) if text not in core]
        forms += [(text, False) for text in dict.fromkeys(core)]
        return forms

    def streamed(self, text: str) -> "Activity":
        return self.model_copy(update={"streamed_chars": self.streamed_chars + len(text)})
