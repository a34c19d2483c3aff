from datetime import datetime

import pytest

from cronlite import matches, next_run

FRIDAY = datetime(2024, 3, 1, 12, 0)  # 2024-03-01 is a Friday


def test_daily_at_noon():
    assert next_run("0 12 * * *", FRIDAY) == datetime(2024, 3, 2, 12, 0)
    assert next_run("0 12 * * *", datetime(2024, 3, 1, 11, 59, 30)) == FRIDAY
    assert matches("0 12 * * *", FRIDAY)


def test_result_is_strictly_after_with_seconds_dropped():
    assert next_run("30 * * * *", datetime(2024, 3, 1, 10, 30)) == datetime(2024, 3, 1, 11, 30)
    assert next_run("30 * * * *", datetime(2024, 3, 1, 10, 29, 59, 999)) == datetime(2024, 3, 1, 10, 30)


def test_year_and_leap_day():
    assert next_run("0 0 1 1 *", datetime(2024, 6, 1)) == datetime(2025, 1, 1)
    assert next_run("0 0 29 2 *", datetime(2024, 3, 1)) == datetime(2028, 2, 29)


def test_impossible_schedule_raises():
    with pytest.raises(ValueError):
        next_run("0 0 30 2 *", FRIDAY)


def test_steps():
    assert next_run("*/15 * * * *", datetime(2024, 3, 1, 10, 7)) == datetime(2024, 3, 1, 10, 15)
    assert next_run("0 */6 * * *", datetime(2024, 3, 1, 7, 0)) == datetime(2024, 3, 1, 12, 0)
    assert next_run("50/5 * * * *", datetime(2024, 3, 1, 10, 56)) == datetime(2024, 3, 1, 11, 50)


def test_ranges_with_steps_and_weekday_ranges():
    after = datetime(2024, 3, 1, 17, 30)
    assert next_run("10-30/10 9-17 * * 1-5", after) == datetime(2024, 3, 4, 9, 10)
    assert next_run("0 8,20 * * *", datetime(2024, 3, 1, 9)) == datetime(2024, 3, 1, 20, 0)


def test_day_of_month_or_day_of_week():
    assert next_run("0 12 13 * 5", FRIDAY) == datetime(2024, 3, 8, 12, 0)
    assert next_run("0 12 13 * 5", datetime(2024, 3, 9)) == datetime(2024, 3, 13, 12, 0)
    assert next_run("0 12 */2 * 5", FRIDAY) == datetime(2024, 3, 15, 12, 0)


def test_sunday_is_0_or_7():
    assert next_run("0 9 * * 7", FRIDAY) == datetime(2024, 3, 3, 9, 0)
    assert next_run("0 9 * * 0", FRIDAY) == datetime(2024, 3, 3, 9, 0)


@pytest.mark.parametrize(
    "expr",
    ["60 * * * *", "* * * *", "5-1 * * * *", "*/0 * * * *", "a * * * *", "1,,2 * * * *",
     "* * 0 * *", "* * * 13 *", "* * * * 8", "* 24 * * *"],
)
def test_invalid_expressions_raise(expr):
    with pytest.raises(ValueError):
        matches(expr, FRIDAY)
