from datetime import date

import datemath


def test_add_days():
    assert datemath.add_days(date(2024, 2, 28), 2) == date(2024, 3, 1)


def test_add_months_simple():
    assert datemath.add_months(date(2023, 3, 10), 2) == date(2023, 5, 10)
    assert datemath.add_months(date(2023, 3, 10), 0) == date(2023, 3, 10)


def test_add_months_clamps_to_month_end():
    assert datemath.add_months(date(2023, 1, 31), 1) == date(2023, 2, 28)
    assert datemath.add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)
    assert datemath.add_months(date(2023, 8, 31), 1) == date(2023, 9, 30)


def test_add_months_crosses_year_boundaries():
    assert datemath.add_months(date(2023, 11, 15), 1) == date(2023, 12, 15)
    assert datemath.add_months(date(2023, 11, 15), 2) == date(2024, 1, 15)
    assert datemath.add_months(date(2023, 12, 1), 25) == date(2026, 1, 1)


def test_add_negative_months():
    assert datemath.add_months(date(2024, 1, 10), -1) == date(2023, 12, 10)
    assert datemath.add_months(date(2024, 3, 31), -1) == date(2024, 2, 29)
    assert datemath.add_months(date(2024, 5, 20), -17) == date(2022, 12, 20)


def test_business_days_between():
    monday = date(2024, 1, 1)
    assert datemath.business_days_between(monday, date(2024, 1, 8)) == 5
    assert datemath.business_days_between(monday, date(2024, 1, 8), holidays=[monday]) == 4
    assert datemath.business_days_between(date(2024, 1, 6), date(2024, 1, 8)) == 0
    assert datemath.business_days_between(date(2024, 1, 8), monday) == -5
    assert datemath.business_days_between(monday, monday) == 0
