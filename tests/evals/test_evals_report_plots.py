"""How the report's pictures read: miss labels on the per-call bars, numbering from #1, and
footnotes that stay inside the figure."""

from __future__ import annotations

import pytest

from hitrate.evals.plots import MISS_LABEL_CHARS, call_bars, cost_vs_pass_rate, short_label, to_png, wrap_items
from hitrate.evals.report import Block, CallBar, ConfigKey, Quantiles, Trajectory
from hitrate.store.cost import UsageTotals

LONG = "prefix_changed(history[12], tool_result of call_0123456789abcdef)"


def trajectory() -> Trajectory:
    calls = [
        CallBar(number=1, read=0, write=4_000, fresh=4, output=40, cost_usd=0.01, miss_reason="cold"),
        CallBar(number=2, read=4_000, write=300, fresh=4, output=30, cost_usd=0.002, miss_reason=None),
        CallBar(number=3, read=700, write=0, fresh=4_000, output=20, cost_usd=0.008, miss_reason="prefix_changed(system, line 29)"),
        CallBar(number=4, read=4_700, write=100, fresh=4, output=20, cost_usd=0.002, miss_reason=None),
        CallBar(number=5, read=0, write=5_000, fresh=4, output=20, cost_usd=0.013, miss_reason="ttl_expired"),
        CallBar(number=6, read=None, write=0, fresh=5_100, output=20, cost_usd=None, miss_reason=LONG),
    ]
    return Trajectory(task_id="t1", task_name="lru-recency", block="m · naive · cold", calls=calls)


def _inside(fig, artist) -> bool:
    box = artist.get_window_extent()
    whole = fig.bbox
    return box.x0 >= whole.x0 - 1 and box.x1 <= whole.x1 + 1 and box.y0 >= whole.y0 - 1 and box.y1 <= whole.y1 + 1


def test_calls_are_numbered_from_one_and_only_misses_are_marked():
    fig = call_bars(trajectory())
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["#1", "#2", "#3", "#4", "#5", "#6"]
    texts = [t.get_text() for t in ax.texts]
    assert texts[:4] == ["✗ cold", "✗ prefix_changed(system, line 29)", "✗ ttl_expired", f"✗ {short_label(LONG)} [read unknown]"]
    assert len(texts) == 4  # calls #2 and #4 read what they could: no mark
    # Each label sits at the end of its own bar.
    ends = {1: 4_044, 3: 4_720, 5: 5_024, 6: 5_120}
    for text, (number, end) in zip(ax.texts, ends.items()):
        assert text.xy == pytest.approx((end, number - 1))
    # The running cost ends where the longest bar ends, and the dollar scale says how much it is.
    (line,) = ax.lines
    assert line.get_xdata()[-1] == pytest.approx(5_120)
    assert ax.child_axes[0].get_xlabel() == "running cost (USD)"
    colours = [t.get_color() for t in ax.get_yticklabels()]
    assert colours[0] == colours[2] != colours[1]


def test_long_miss_labels_are_shortened():
    assert short_label("ttl_expired") == "ttl_expired"
    cut = short_label(LONG)
    assert len(cut) == MISS_LABEL_CHARS and cut.endswith("…") and LONG.startswith(cut[:-1])


def test_miss_labels_stay_inside_the_figure():
    fig = call_bars(trajectory())
    to_png(fig)  # lays the figure out
    assert all(_inside(fig, t) for t in fig.axes[0].texts)


def block(model: str, *, cost: float | None, passed: int = 3) -> Block:
    return Block(
        key=ConfigKey(model=model, layout="cache-aware", cache_mode="cold"),
        run_ids=["r"], n_tasks=4, outcomes={"pass": passed, "fail": 4 - passed}, n_scored=4, n_passed=passed,
        pass_rate=passed / 4, pass_rate_ci95=(0.3, 0.95), total_cost_usd=cost, unpriced_calls=0 if cost else 4,
        cost_per_task_usd=cost / 4 if cost else None, cost_per_passed_task_usd=cost / passed if cost and passed else None,
        tokens=UsageTotals(), miss_reasons=[], task_wall_s=Quantiles(n=0), ttft_s=Quantiles(n=0), tasks=[],
    )  # fmt: skip


def test_not_shown_footnote_is_wrapped_inside_the_figure():
    blocks = [block("claude-sonnet-5", cost=0.4)] + [
        block(f"local/some-rather-long-model-folder-name-{i}", cost=None) for i in range(6)
    ]
    fig = cost_vs_pass_rate(blocks)
    to_png(fig)
    (note,) = [t for t in fig.texts if t.get_text().startswith("not shown")]
    assert _inside(fig, note)
    lines = note.get_text().splitlines()
    assert len(lines) > 1
    for i in range(6):  # every configuration named, none cut across lines
        assert sum(f"local/some-rather-long-model-folder-name-{i} · cache-aware · cold" in line for line in lines) == 1
    assert len(fig.axes[0].containers) == 1


def test_wrap_items_keeps_items_whole_and_breaks_only_overlong_ones():
    assert wrap_items(["aaa;", "bbb;", "cc"], 9) == ["aaa; bbb;", "cc"]
    assert wrap_items(["x" * 12], 5) == ["xxxxx", "xxxxx", "xx"]


def test_empty_picture_points_at_price_as():
    fig = cost_vs_pass_rate([block("local/tiny", cost=None)])
    assert any("--price-as" in t.get_text() for t in fig.axes[0].texts)
    assert not fig.axes[0].containers


def test_a_long_title_is_wrapped_inside_the_figure():
    long_block = "openai-compat/qwen2.5-coder-32b-instruct@10.0.0.5:8000 · cache-aware · cold · replay"
    fig = call_bars(trajectory().model_copy(update={"block": long_block}), price_label="priced as claude-sonnet-5")
    to_png(fig)  # lays the figure out
    # Above the figure, clear of the running-cost axis along the top.
    title = fig._suptitle
    assert "\n" in title.get_text() and title.get_text().replace("\n", " ").endswith("priced as claude-sonnet-5")
    assert _inside(fig, title)


def _layout_block(layout: str, cost: float) -> Block:
    b = block("claude-sonnet-5", cost=cost, passed=6)
    return b.model_copy(update={"key": ConfigKey(model="claude-sonnet-5", layout=layout, cache_mode="cold", policy="replay"),
                                "n_tasks": 6, "n_scored": 6, "n_passed": 6, "pass_rate": 1.0, "pass_rate_ci95": (0.61, 1.0),
                                "cost_per_passed_task_usd": cost})  # fmt: skip


def test_the_headline_the_axis_range_and_one_tick_size():
    fig = cost_vs_pass_rate([_layout_block("cache-aware", 0.0148), _layout_block("naive", 0.0540)])
    to_png(fig)
    assert fig._suptitle.get_text() == "cache-aware: 73% cheaper per passed task than naive"
    assert _inside(fig, fig._suptitle) and _inside(fig, fig.axes[0].title)
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    assert 40 <= low <= 55 and high == 102  # both points at 100%, intervals down to 61%: not 0-100
    sizes = {t.get_fontsize() for t in ax.xaxis.get_majorticklabels() + ax.xaxis.get_minorticklabels() if t.get_text()}
    assert len(sizes) == 1
