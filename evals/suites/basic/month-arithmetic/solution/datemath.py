"""Date arithmetic helpers."""

import calendar
from collections.abc import Iterable
from datetime import date, timedelta


def add_days(d: date, n: int) -> date:
    return d + timedelta(days=n)


def add_months(d: date, months: int) -> date:
    """The same day `months` calendar months later (earlier when negative), clamped to month end."""
    index = d.year * 12 + (d.month - 1) + months
    year, month0 = divmod(index, 12)
    last_day = calendar.monthrange(year, month0 + 1)[1]
    return date(year, month0 + 1, min(d.day, last_day))


def business_days_between(start: date, end: date, holidays: Iterable[date] = ()) -> int:
    """Weekdays d with start <= d < end that are not holidays; negative when end < start."""
    if end < start:
        return -business_days_between(end, start, holidays)
    skip = set(holidays)
    count = 0
    day = start
    while day < end:
        if day.weekday() < 5 and day not in skip:
            count += 1
        day += timedelta(days=1)
    return count
