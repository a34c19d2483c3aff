import pytest

from csvline import parse_line


def test_plain_and_empty_fields():
    assert parse_line("a,b,c") == ["a", "b", "c"]
    assert parse_line("a,,c") == ["a", "", "c"]


def test_quoted_delimiter():
    assert parse_line('"a,b",c') == ["a,b", "c"]


def test_custom_delimiter():
    assert parse_line("x;y;z", delimiter=";") == ["x", "y", "z"]


def test_doubled_quote_is_a_literal_quote():
    assert parse_line('"say ""hi""",x') == ['say "hi"', "x"]
    assert parse_line('""""') == ['"']


def test_unterminated_quote_raises():
    with pytest.raises(ValueError):
        parse_line('a,"open')


def test_line_ending_is_not_part_of_the_last_field():
    assert parse_line("a,b\r\n") == ["a", "b"]
    assert parse_line("a,b\n") == ["a", "b"]
