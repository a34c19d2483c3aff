import pytest

from rle import decode, encode


def test_round_trip_short_runs():
    assert encode("aaab") == "3a1b"
    assert decode("3a1b") == "aaab"
    assert decode(encode("hello  world")) == "hello  world"


def test_empty():
    assert encode("") == "" and decode("") == ""


def test_decode_multi_digit_counts():
    assert encode("x" * 12) == "12x"
    assert decode("12x3y") == "x" * 12 + "yyy"
    text = "a" * 105 + "b" + "c" * 10
    assert decode(encode(text)) == text


def test_encode_rejects_digits():
    with pytest.raises(ValueError):
        encode("abc1")


def test_decode_rejects_malformed_input():
    for bad in ["a", "3", "2a5", "0a"]:
        with pytest.raises(ValueError):
            decode(bad)
