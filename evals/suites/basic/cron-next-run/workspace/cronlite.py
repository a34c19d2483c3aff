"""When does a cron schedule next fire?"""

from datetime import datetime, timedelta

# (name, lowest value, highest value) of the five fields, in order.
FIELDS = [("minute", 0, 59), ("hour", 0, 23), ("day", 1, 31), ("month", 1, 12), ("weekday", 0, 6)]
SEARCH_YEARS = 5


def parse_field(text: str, low: int, high: int) -> set[int]:
    if text == "*":
        return set(range(low, high + 1))
    return {int(part) for part in text.split(",")}


def parse(expr: str) -> list[set[int]]:
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError(f"a cron expression has 5 fields, got {len(parts)}: {expr!r}")
    return [parse_field(part, low, high) for part, (_, low, high) in zip(parts, FIELDS)]


def _cron_weekday(moment: datetime) -> int:
    return (moment.weekday() + 1) % 7  # cron counts from Sunday = 0


def _day_matches(fields: list[set[int]], moment: datetime) -> bool:
    _, _, days, months, weekdays = fields
    return moment.month in months and moment.day in days and _cron_weekday(moment) in weekdays


def matches(expr: str, moment: datetime) -> bool:
    fields = parse(expr)
    return moment.minute in fields[0] and moment.hour in fields[1] and _day_matches(fields, moment)


def next_run(expr: str, after: datetime) -> datetime:
    fields = parse(expr)
    moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    limit = after + timedelta(days=366 * SEARCH_YEARS)
    while moment < limit:
        if not _day_matches(fields, moment):
            moment = moment.replace(hour=0, minute=0) + timedelta(days=1)
        elif moment.hour not in fields[1]:
            moment = moment.replace(minute=0) + timedelta(hours=1)
        elif moment.minute not in fields[0]:
            moment += timedelta(minutes=1)
        else:
            return moment
    raise ValueError(f"{expr!r} does not fire within {SEARCH_YEARS} years")
