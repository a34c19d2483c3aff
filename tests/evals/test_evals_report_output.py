"""Report pictures, HTML and the `hitrate report` command."""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest
import typer
from typer.testing import CliRunner

from hitrate.evals.plots import call_bars, cost_vs_pass_rate, pareto_frontier, to_png, to_svg
from hitrate.evals.report import build_report
from hitrate.evals.report_render import html, money
from hitrate.evals.commands.report import register
from hitrate.store.ledger import Ledger

from test_evals_report import populate


@pytest.fixture
def ledger_path(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(path) as ledger:
        populate(ledger)
    return path


@pytest.fixture
def report(ledger_path):
    with Ledger(ledger_path) as ledger:
        return build_report(ledger, ["run-cold", "run-warm", "run-naive"], trajectory_task="task-3")


def test_cost_vs_pass_rate_plots_one_point_per_block_with_its_interval(report):
    fig = cost_vs_pass_rate(report.blocks)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    points = []
    for container in ax.containers:
        x, y = container.lines[0].get_xydata()[0]
        bar = container.lines[2][0].get_segments()[0]
        points.append((x, y, bar[0][1], bar[1][1]))
    assert len(points) == 3
    for b, (x, y, low, high) in zip(report.blocks, points):
        assert x == pytest.approx(b.cost_per_passed_task_usd)
        assert y == pytest.approx(b.pass_rate * 100)
        assert (low, high) == pytest.approx(tuple(v * 100 for v in b.pass_rate_ci95))


def test_pareto_frontier_keeps_only_undominated_points():
    assert pareto_frontier([(1.0, 50.0), (2.0, 40.0), (3.0, 70.0), (0.5, 20.0)]) == [(0.5, 20.0), (1.0, 50.0), (3.0, 70.0)]


def test_call_bars_stack_four_buckets_and_label_misses(report):
    fig = call_bars(report.trajectory)
    ax = fig.axes[0]
    n = len(report.trajectory.calls)
    assert len(ax.patches) == 4 * n
    widths = [p.get_width() for p in ax.patches]
    reads = widths[:n]
    assert reads == [c.read for c in report.trajectory.calls]
    labels = {t.get_text() for t in ax.texts}
    assert {"✗ cold", "✗ ttl_expired"} <= labels
    assert len(ax.lines) == 1 and ax.child_axes  # running cost line, with its dollar scale on top


def test_pictures_render_as_svg_and_png(report):
    svg = to_svg(cost_vs_pass_rate(report.blocks))
    assert svg.startswith("<svg") and "</svg>" in svg
    assert to_svg(cost_vs_pass_rate(report.blocks)) == svg  # deterministic ids, no timestamp
    png = to_png(call_bars(report.trajectory))
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_html_embeds_both_pictures_and_the_figures(report):
    page = html(report)
    # The cost picture, and the per-call picture of the same task for each block (both sides).
    assert page.count("<svg") == 2 + len(report.compared) == 4
    for b in report.blocks:
        assert b.key.label in page
    assert money(report.blocks[0].cost_per_passed_task_usd) in page
    assert "infra_error" in page
    png_page = html(report, picture_format="png")
    assert png_page.count("data:image/png;base64,") == 4 and "<svg" not in png_page


def test_the_per_call_picture_shows_the_task_on_every_side_on_one_scale(report):
    from hitrate.evals.plots import report_figures

    sides = [report.trajectory, *report.compared]
    assert {side.task_name for side in sides} == {report.trajectory.task_name}
    assert {side.block for side in sides} == {b.key.label for b in report.blocks}
    pictures = [(stem, fig) for stem, _, fig in report_figures(report) if stem.startswith("calls_per_task")]
    assert [stem for stem, _ in pictures] == ["calls_per_task", "calls_per_task_2", "calls_per_task_3"]
    naive = next(i for i, side in enumerate(sides) if "naive" in side.block)
    assert "naive" in pictures[naive][1].texts[0].get_text()  # the suptitle names the side
    # One token scale: a bar as long in one picture stands for as many tokens in the other.
    spans = [fig.axes[0].get_xlim()[1] for _, fig in pictures]
    assert min(spans) >= max(sum(getattr(c, n) or 0 for n in ("read", "write", "fresh", "output"))
                             for side in sides for c in side.calls)


def run_cli(*args):
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_entry_point_is_declared():
    found = {ep.name: ep.value for ep in entry_points(group="hitrate.commands")}
    assert found.get("report") == "hitrate.evals.commands.report:register"


def test_cli_table(ledger_path):
    result = run_cli("report", "run-cold", "run-warm", "--db", str(ledger_path))
    assert result.exit_code == 0, result.output
    assert "cache-aware · cold" in result.output and "cache-aware · warm" in result.output
    assert "6/9" in result.output and "calls with a miss, by reason" in result.output


def test_cli_json_and_html_to_files_with_pictures(ledger_path, tmp_path):
    out = tmp_path / "r.json"
    result = run_cli("report", "run-cold", "--db", str(ledger_path), "--format", "json", "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["blocks"][0]["n_passed"] == 6
    page = tmp_path / "r.html"
    pics = tmp_path / "pics"
    result = run_cli("report", "run-cold", "run-naive", "--db", str(ledger_path), "-f", "html", "-o", str(page), "--pictures", str(pics))
    assert result.exit_code == 0, result.output
    assert page.read_text().count("<svg") == 3  # the cost picture; the task's calls, cache-aware and naive
    assert sorted(p.name for p in pics.iterdir()) == [
        "calls_per_task.png", "calls_per_task.svg", "calls_per_task_2.png", "calls_per_task_2.svg",
        "cost_per_passed_task_vs_pass_rate.png", "cost_per_passed_task_vs_pass_rate.svg",
    ]


def test_cli_errors_are_clear(ledger_path, tmp_path):
    result = run_cli("report", "nope", "--db", str(ledger_path))
    assert result.exit_code == 2 and "no run id starts with 'nope'" in result.output
    result = run_cli("report", "run-cold", "--db", str(ledger_path), "--format", "pdf")
    assert result.exit_code == 2 and "--format" in result.output
    result = run_cli("report", "run-cold", "--db", str(tmp_path / "missing.db"))
    assert result.exit_code == 2 and "does not exist" in result.output


def test_any_hit_share_names_the_calls_it_is_over(tmp_path):
    """The share is over the calls that reported a read count: one hit of one known call, beside
    one call without a count, reads "100% (1/1; 1 unknown)", never "100% (2/2)"."""
    from rich.console import Console

    from hitrate.evals.report_render import tables
    from hitrate.store.usage import Usage
    from test_evals_report import add_task, usage

    with Ledger(tmp_path / "ledger.db") as ledger:
        run = ledger.start_run("mixed", {"model": "claude-sonnet-4-6", "layout": "cache-aware", "cache_mode": "cold"}, run_id="run-mixed")
        no_read_count = Usage(fresh_input=900, output=40)
        add_task(ledger, run.id, "task-0", "pass", [(usage(800, 0, 100), 0.01, 0.5, None, 0, 0.0),
                                                    (no_read_count, 0.01, 0.5, None, 0, 0.0)])
        report = build_report(ledger, ["run-mixed"])
    console = Console(width=80, record=True, color_system=None)
    console.print(tables(report))
    row = next(line for line in console.export_text().splitlines() if line.startswith("any-hit calls"))
    assert row.split()[-4:] == ["100%", "(1/1;", "1", "unknown)"], row
