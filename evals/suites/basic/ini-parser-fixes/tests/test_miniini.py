import pytest

from miniini import ParseError, parse


def test_basic_sections():
    assert parse("[db]\nhost = h\nport=1\n[app]\nname = x\n") == {
        "db": {"host": "h", "port": "1"},
        "app": {"name": "x"},
    }


def test_hash_comments_and_blank_lines():
    assert parse("# top\n\n[s]\n  # indented\nk = v\n\n") == {"s": {"k": "v"}}


def test_semicolon_comments():
    assert parse("; top\n[s]\n ; note\nk = v\n") == {"s": {"k": "v"}}


def test_values_may_contain_equals():
    assert parse("[s]\nurl = a=b&c=d\n") == {"s": {"url": "a=b&c=d"}}


def test_keys_are_case_insensitive():
    assert parse("[S]\nHost = One\nhost = Two\n") == {"S": {"host": "Two"}}


def test_repeated_section_merges():
    assert parse("[s]\na = 1\n[t]\nx = 0\n[ s ]\nb = 2\na = 3\n") == {"s": {"a": "3", "b": "2"}, "t": {"x": "0"}}


@pytest.mark.parametrize(
    "text, line_no",
    [("k = v\n", 1), ("[s]\n\njunk\n", 3), ("[s]\n[broken\n", 2), ("[s]\n[  ]\n", 2)],
)
def test_errors_carry_line_numbers(text, line_no):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.line_no == line_no
