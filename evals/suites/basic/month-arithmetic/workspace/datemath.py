"""Date arithmetic helpers."""

from datetime import date, timedelta


def add_days(d: date, n: int) -> date:
    return d + timedelta(days=n)


def add_months(d: date, months: int) -> date:
    """The same day `months` calendar months later (earlier when negative)."""
    month = d.month + months
    year = d.year + month // 12
    month = month % 12
    return d.replace(year=year, month=month)
