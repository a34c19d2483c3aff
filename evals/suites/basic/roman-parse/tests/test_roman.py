import pytest

import roman


def test_to_roman_examples():
    assert roman.to_roman(1994) == "MCMXCIV"
    assert roman.to_roman(4) == "IV"


def test_to_roman_range():
    with pytest.raises(ValueError):
        roman.to_roman(0)


def test_from_roman_examples():
    assert roman.from_roman("MCMXCIV") == 1994
    assert roman.from_roman("MMMCMXCIX") == 3999
    assert roman.from_roman("XLII") == 42


def test_round_trip():
    for n in range(1, 4000):
        assert roman.from_roman(roman.to_roman(n)) == n


def test_non_canonical_numerals_are_rejected():
    for bad in ["", "iv", "IIII", "VX", "IC", "XM", "MMMM", "VV", "IIV", "X1", " X"]:
        with pytest.raises(ValueError):
            roman.from_roman(bad)
