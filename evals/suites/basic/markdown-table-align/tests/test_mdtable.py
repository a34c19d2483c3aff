import pytest

from mdtable import render_table


def test_basic_table():
    assert render_table(["name", "qty"], [["pear", 3], ["fig", 12]]) == (
        "| name | qty |\n"
        "| ---- | --- |\n"
        "| pear | 3   |\n"
        "| fig  | 12  |"
    )


def test_alignment():
    table = render_table(
        ["item", "price", "n"], [["tea", 1.5, 2], ["coffee", 12.25, 10]], align=["left", "right", "center"]
    )
    assert table == (
        "| item   | price |  n  |\n"
        "| :----- | ----: | :-: |\n"
        "| tea    |   1.5 |  2  |\n"
        "| coffee | 12.25 | 10  |"
    )


def test_pipes_are_escaped():
    assert render_table(["a"], [["x|y"]]) == "| a    |\n| ---- |\n| x\\|y |"


def test_short_rows_are_padded():
    assert render_table(["a", "b"], [["1"]]) == "| a   | b   |\n| --- | --- |\n| 1   |     |"


def test_bad_input_raises():
    with pytest.raises(ValueError):
        render_table(["a"], [["1", "2"]])
    with pytest.raises(ValueError):
        render_table(["a"], [], align=["middle"])
    with pytest.raises(ValueError):
        render_table(["a", "b"], [], align=["left"])
