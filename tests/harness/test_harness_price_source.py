"""Where runs and reports take prices from: --prices, $HITRATE_PRICES, the config file's `prices`,
else the shipped snapshot; LiteLLM files merged over the shipped prices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hitrate.harness.price_source import PriceSourceError, configured_price_file, load_price_file, price_table
from hitrate.store.prices import PriceTable

EXCERPT = Path(__file__).parent.parent / "store" / "data" / "litellm_prices_excerpt.json"


def _litellm_with(tmp_path: Path, model: str, input_per_token: float) -> Path:
    data = json.loads(EXCERPT.read_text())
    data[model] = {**data[model], "input_cost_per_token": input_per_token}
    path = tmp_path / "model_prices_and_context_window.json"
    path.write_text(json.dumps(data))
    return path


def test_a_litellm_file_replaces_the_models_it_prices_and_keeps_the_rest(tmp_path):
    table = load_price_file(_litellm_with(tmp_path, "claude-sonnet-4-6", 9e-06))
    assert table.lookup("claude-sonnet-4-6").current.tiers[0].input == pytest.approx(9.0)
    # A model the file lacks keeps its shipped price, off-peak rates and all.
    shipped = PriceTable.default()
    assert table.lookup("claude-sonnet-5").model_dump() == shipped.lookup("claude-sonnet-5").model_dump()
    assert table.id != shipped.id  # recorded with each priced ledger row, so runs can be re-priced


def test_a_hitrate_snapshot_file_is_used_as_it_is(tmp_path):
    path = tmp_path / "snapshot.json"
    path.write_text(PriceTable.default().to_json())
    assert load_price_file(path).id == PriceTable.default().id


def test_the_order_of_sources(tmp_path, monkeypatch):
    litellm = _litellm_with(tmp_path, "claude-sonnet-4-6", 7e-06)
    config = tmp_path / "config.toml"
    config.write_text('prices = "model_prices_and_context_window.json"\n')  # relative to the config file
    monkeypatch.delenv("HITRATE_PRICES", raising=False)
    monkeypatch.setenv("HITRATE_CONFIG", str(config))
    assert configured_price_file() == litellm
    assert price_table().lookup("claude-sonnet-4-6").current.tiers[0].input == pytest.approx(7.0)
    other = tmp_path / "other.json"
    other.write_text(PriceTable.default().to_json())
    monkeypatch.setenv("HITRATE_PRICES", str(other))
    assert price_table().id == PriceTable.default().id
    assert price_table(litellm).id != PriceTable.default().id  # --prices wins over both
    monkeypatch.delenv("HITRATE_PRICES")
    monkeypatch.setenv("HITRATE_CONFIG", str(tmp_path / "absent.toml"))
    assert price_table().id == PriceTable.default().id


def test_bad_price_files_say_what_is_wrong(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(PriceSourceError, match="cannot read price file"):
        load_price_file(missing)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(PriceSourceError, match="is not JSON"):
        load_price_file(broken)
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    with pytest.raises(PriceSourceError, match="neither a hitrate snapshot nor a LiteLLM price map"):
        load_price_file(empty)


def test_run_prices_its_calls_from_the_file(fake_server, workspace, tmp_path):
    import typer
    from fake_llm_server import Reply

    from hitrate.harness import cli_run
    from hitrate.store.ledger import Ledger

    app = typer.Typer()
    cli_run.register(app)
    prices = _litellm_with(tmp_path, "claude-sonnet-4-6", 10e-06)  # $10 per 1M input tokens
    fake_server.push(Reply(text="ok", usage={"input_tokens": 100_000, "cache_creation_input_tokens": 0,
                                             "cache_read_input_tokens": 0, "output_tokens": 0}))  # fmt: skip
    db = tmp_path / "l.db"
    result = CliRunner().invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-4-6", "-w", str(workspace), "--db", str(db),
                                      "--prices", str(prices)],
                                env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url})  # fmt: skip
    assert result.exit_code == 0, result.output
    with Ledger(db) as ledger:
        (call,) = ledger.calls()
    assert call.cost_usd == pytest.approx(1.0) and call.price_snapshot_id == load_price_file(prices).id
