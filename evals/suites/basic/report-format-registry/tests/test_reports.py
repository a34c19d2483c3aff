import json
from pathlib import Path

import pytest

import reports
from reports import Row

ROWS = [Row("apple", 3, 50), Row("pear, green", 12, 1250)]


def test_csv_format():
    assert reports.render(ROWS, "csv") == 'name,quantity,price\napple,3,0.50\n"pear, green",12,12.50\n'


def test_json_format():
    assert json.loads(reports.render(ROWS, "json"))[1] == {"name": "pear, green", "quantity": 12, "price": "12.50"}


def test_text_format():
    assert reports.render(ROWS, "text") == (
        "name         quantity  price\n"
        "apple               3   0.50\n"
        "pear, green        12  12.50"
    )


def test_unknown_format_raises_value_error():
    with pytest.raises(ValueError):
        reports.render(ROWS, "xml")


def test_available_formats_and_lookup():
    from reports.registry import available_formats, get_renderer

    assert {"csv", "json", "markdown", "text"} <= set(available_formats())
    assert available_formats() == sorted(available_formats())
    assert get_renderer("csv") is reports.csv_out.to_csv


def test_unknown_format_message_lists_formats():
    from reports.registry import available_formats

    with pytest.raises(ValueError) as info:
        reports.render(ROWS, "xml")
    assert str(info.value) == f"unknown format 'xml'; available: {', '.join(available_formats())}"


def test_new_formats_plug_in_without_editing_render():
    from reports.registry import register

    @register("names-only")
    def names(rows):
        return ";".join(r.name for r in rows)

    assert reports.render(ROWS, "names-only") == "apple;pear, green"


def test_duplicate_registration_is_rejected():
    from reports.registry import register

    with pytest.raises(ValueError):
        register("csv")(lambda rows: "")
    assert reports.render(ROWS, "csv").startswith("name,quantity,price")


def test_markdown_format():
    from reports.markdown_out import to_markdown

    assert reports.render(ROWS, "markdown") == (
        "| name | quantity | price |\n"
        "| --- | ---: | ---: |\n"
        "| apple | 3 | 0.50 |\n"
        "| pear, green | 12 | 12.50 |"
    )
    assert to_markdown([]) == "| name | quantity | price |\n| --- | ---: | ---: |"


def test_builtin_renderers_have_no_switch():
    source = Path(reports.__file__).read_text(encoding="utf-8")
    for name in ('"csv"', '"json"', '"text"', '"markdown"', "'csv'", "'json'", "'text'", "'markdown'"):
        assert name not in source
