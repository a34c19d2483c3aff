"""Pure pieces of the TUI: bars, figures, commands, input history, switch estimates."""

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hitrate.store.usage import BUCKETS, Usage
from hitrate.tui.app_commands import cost_markdown
from hitrate.tui.commands import CommandError, parse_command
from hitrate.tui.figures import CallFigure, SessionFigures, bar_cells, bar_parts, fmt_tokens, fmt_usd
from hitrate.tui.link import estimate_switch
from hitrate.tui.prompt_input import InputHistory
from hitrate.tui.tool_panel import args_text, tool_title

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)


def usage(**counts: int | None) -> Usage:
    return Usage(**{**dict.fromkeys(BUCKETS, 0), **counts})


def figure(number: int, model: str = "claude-sonnet-4-6", **kw: object) -> CallFigure:
    return CallFigure(number=number, backend="anthropic", model=model, started_at=T0, **kw)  # type: ignore[arg-type]


@given(
    st.dictionaries(st.sampled_from(["read", "write", "fresh", "output"]), st.integers(0, 10**7)),
    st.integers(0, 80),
)
def test_bar_cells_fill_the_width_exactly(parts: dict[str, int], width: int) -> None:
    cells = bar_cells(parts, width)
    if sum(parts.values()) == 0 or width == 0:
        assert cells == []
        return
    assert sum(n for _, n in cells) == width
    # Every non-empty part shows while there is a cell for each.
    nonzero = [p for p, n in parts.items() if n]
    if width >= len(nonzero):
        assert {p for p, _ in cells} == set(nonzero)


def test_bar_cells_proportions_and_unknown_parts() -> None:
    assert bar_cells({"read": 900, "write": 0, "fresh": 100, "output": None}, 10) == [("read", 9), ("fresh", 1)]
    parts = bar_parts(usage(cache_read=None, cache_write_5m=7, fresh_input=3, output=5))
    assert parts == {"read": None, "write": 7, "fresh": 3, "output": 5}
    with pytest.raises(ValueError):
        bar_cells(parts, -1)
    # A server that reports the prompt's size but not what the cache did with it.
    vllm = Usage(prompt_total=1200, output=30)
    assert list(bar_parts(vllm).items()) == [("read", None), ("write", None), ("fresh", None), ("unsplit", 1200), ("output", 30)]
    assert bar_cells(bar_parts(vllm), 41) == [("unsplit", 40), ("output", 1)]


def test_session_hit_ratio_is_sum_based_not_a_mean() -> None:
    figures = SessionFigures(
        [
            figure(1, usage=usage(cache_write_5m=9000, fresh_input=1000, output=10), cost_usd=0.04, miss_reason="cold", miss_cost_usd=0.03),
            figure(2, usage=usage(cache_read=90, fresh_input=10, output=10), cost_usd=0.001),
        ]
    )
    totals = figures.totals()
    # Σread / Σ(read+write+fresh) = 90 / 10100; a mean of per-call ratios would say 45%.
    assert totals.hit_ratio == pytest.approx(90 / 10100)
    assert figures.miss_cost_usd() == pytest.approx(0.03)
    report = cost_markdown(figures)
    assert "0.9%" in report and "`cold`" in report and "$0.030" in report
    assert "| calls | cache read |" in report
    # On a narrow screen the same figures come as a list.
    narrow = cost_markdown(figures, compact=True)
    assert "- Σ-hit ratio: **0.9%**" in narrow and "- calls: **2**" in narrow and "|" not in narrow.split("**Misses**")[0]


def test_unknown_tokens_are_shown_as_unknown() -> None:
    assert fmt_tokens(None) == "?" and fmt_tokens(999) == "999" and fmt_tokens(12_345) == "12.3k"
    assert fmt_tokens(2_500_000) == "2.50M"
    assert fmt_usd(None) == "no price" and fmt_usd(0.00123) == "$0.0012" and fmt_usd(1.5) == "$1.500"
    figures = SessionFigures([figure(1, usage=usage(cache_read=None, fresh_input=10, output=3))])
    assert "cache_read in 1" in cost_markdown(figures)


@pytest.mark.parametrize(
    ("line", "name", "arg"),
    [("/model openai/gpt-5.4", "model", "openai/gpt-5.4"), ("/COST", "cost", ""), ("  /resume  ", "resume", ""), ("/resume abc", "resume", "abc"), ("/approve off", "approve", "off")],
)
def test_parse_command(line: str, name: str, arg: str) -> None:
    command = parse_command(line)
    assert (command.name, command.arg) == (name, arg)


@pytest.mark.parametrize(
    ("line", "error"),
    [("/model", "usage: /model <spec>"), ("/cost now", "takes no argument"), ("/frobnicate", "unknown command /frobnicate"), ("/approve maybe", "usage: /approve")],
)
def test_bad_commands_say_what_to_type(line: str, error: str) -> None:
    with pytest.raises(CommandError, match=error):
        parse_command(line)


def test_history_walks_back_and_returns_the_draft() -> None:
    history = InputHistory()
    for line in ["one", "two", "two", "  "]:
        history.add(line)
    assert history.entries == ["one", "two"]
    assert history.next() is None
    assert history.previous("draft") == "two"
    assert history.previous("two") == "one"
    assert history.previous("one") is None
    assert history.next() == "two"
    assert history.next() == "draft"
    assert history.next() is None


def test_switch_estimate_prices_the_lost_prefix() -> None:
    last = figure(3, usage=usage(cache_read=100_000, cache_write_5m=2_000, fresh_input=500, output=300))
    estimate = estimate_switch(last, "claude-sonnet-4-6", "anthropic/claude-sonnet-4-6", "openai/gpt-5.4", "gpt-5.4", "openai", T0)
    assert estimate.prefix_tokens == 102_500
    assert estimate.resend_as == "fresh input"  # GPT-5.4 writes are free: the prefix is billed as input
    assert estimate.resend_usd is not None and estimate.stay_usd is not None
    assert estimate.resend_usd > estimate.stay_usd
    assert "new cache epoch" in estimate.message() and "102k" in estimate.message()
    to_claude = estimate_switch(last, "gpt-5.4", "openai/gpt-5.4", "anthropic/claude-opus-4-7", "claude-opus-4-7", "anthropic", T0)
    assert to_claude.resend_as == "5m cache write"
    local = estimate_switch(last, "claude-sonnet-4-6", "a", "local/m", "/m", "local", T0)
    assert local.resend_usd is None and "no price" in local.resend_as
    nothing = estimate_switch(None, "claude-sonnet-4-6", "a", "b", "gpt-5.4", "openai", T0)
    assert "costs nothing extra" in nothing.message()


def test_tool_titles_and_args() -> None:
    assert tool_title("shell", {"command": "pytest -q\necho done"}) == "shell: pytest -q"
    assert tool_title("grep", {"pattern": "x" * 80}).endswith("…")
    assert tool_title("mystery", {"a": 1}) == "mystery"
    assert args_text({"path": "a.py", "content": "l1\nl2"}) == 'content:\n  l1\n  l2\npath: "a.py"'


def test_wording_errors_said_once_and_prefixes_below_the_cache_minimum() -> None:
    from hitrate.store.prices import PriceTable
    from hitrate.tui.figures import error_line

    assert error_line("cancelled: cancelled") == "cancelled"
    assert error_line("APIError: overloaded\nmore detail") == "APIError: overloaded"
    minimum = PriceTable.default().find("claude-haiku-4-5").min_cacheable_tokens
    assert minimum and minimum > 2000
    last = figure(1, usage=usage(cache_read=1500, fresh_input=500, output=10))
    estimate = estimate_switch(last, "claude-sonnet-4-6", "anthropic/claude-sonnet-4-6", "anthropic/claude-haiku-4-5",
                               "claude-haiku-4-5", "anthropic", T0)
    # 2,000 tokens is below haiku's minimum: no cache write is promised, all of it is fresh input.
    assert estimate.resend_as == f"fresh input: below its {minimum:,}-token cache minimum, not cached"
    assert "cache write" not in estimate.message()
