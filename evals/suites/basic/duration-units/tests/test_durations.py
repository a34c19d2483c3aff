import pytest

import durations


def test_parse_hours_minutes_seconds():
    assert durations.parse_duration("1h30m") == 5400
    assert durations.parse_duration(" 45s ") == 45


def test_parse_rejects_garbage():
    for bad in ["", "10", "5x", "1h 30m", "h1"]:
        with pytest.raises(ValueError):
            durations.parse_duration(bad)


def test_parse_days_and_weeks():
    assert durations.parse_duration("1w2d") == 777600
    assert durations.parse_duration("2d3h") == 2 * 86400 + 3 * 3600


def test_units_must_descend_and_not_repeat():
    for bad in ["1m1h", "1h1h", "1s1w"]:
        with pytest.raises(ValueError):
            durations.parse_duration(bad)


def test_format_duration():
    assert durations.format_duration(93784) == "1d2h3m4s"
    assert durations.format_duration(604800) == "1w"
    assert durations.format_duration(0) == "0s"
    assert durations.format_duration(61) == "1m1s"
    for n in [1, 59, 3600, 90061, 1209601]:
        assert durations.parse_duration(durations.format_duration(n)) == n


def test_format_rejects_negative():
    with pytest.raises(ValueError):
        durations.format_duration(-1)
