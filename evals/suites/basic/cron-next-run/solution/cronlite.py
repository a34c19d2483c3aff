"""When does a cron schedule next fire?"""

from datetime import datetime, timedelta

# (name, lowest value, highest value) of the five fields, in order. Day of week accepts 7 as a
# second name for Sunday; it is folded onto 0 after parsing.
FIELDS = [("minute", 0, 59), ("hour", 0, 23), ("day", 1, 31), ("month", 1, 12), ("weekday", 0, 7)]
SEARCH_YEARS = 5


def _number(text: str, low: int, high: int) -> int:
    if not text.isdigit():
        raise ValueError(f"not a number: {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{value} is outside {low}-{high}")
    return value


def _item(item: str, low: int, high: int) -> set[int]:
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        step = int(step_text) if step_text.isdigit() else 0
        if step < 1:
            raise ValueError(f"bad step in {item!r}")
    if base == "*":
        start, end = low, high
    elif "-" in base:
        first, _, last = base.partition("-")
        start, end = _number(first, low, high), _number(last, low, high)
        if start > end:
            raise ValueError(f"range {base!r} runs backwards")
    else:
        start = _number(base, low, high)
        end = high if slash else start
    return set(range(start, end + 1, step))


def parse_field(text: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise ValueError(f"empty item in {text!r}")
        values |= _item(item, low, high)
    return values


def parse(expr: str) -> list[set[int]]:
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError(f"a cron expression has 5 fields, got {len(parts)}: {expr!r}")
    fields = [parse_field(part, low, high) for part, (_, low, high) in zip(parts, FIELDS)]
    if 7 in fields[4]:
        fields[4] = (fields[4] - {7}) | {0}
    return fields


def _cron_weekday(moment: datetime) -> int:
    return (moment.weekday() + 1) % 7  # cron counts from Sunday = 0


class _Schedule:
    def __init__(self, expr: str) -> None:
        self.minutes, self.hours, self.days, self.months, self.weekdays = parse(expr)
        parts = expr.split()
        self.days_restricted = not parts[2].startswith("*")
        self.weekdays_restricted = not parts[4].startswith("*")

    def day_matches(self, moment: datetime) -> bool:
        if moment.month not in self.months:
            return False
        by_day = moment.day in self.days
        by_weekday = _cron_weekday(moment) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return by_day or by_weekday
        return by_day and by_weekday


def matches(expr: str, moment: datetime) -> bool:
    schedule = _Schedule(expr)
    return moment.minute in schedule.minutes and moment.hour in schedule.hours and schedule.day_matches(moment)


def next_run(expr: str, after: datetime) -> datetime:
    schedule = _Schedule(expr)
    moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    limit = after + timedelta(days=366 * SEARCH_YEARS)
    while moment < limit:
        if not schedule.day_matches(moment):
            moment = moment.replace(hour=0, minute=0) + timedelta(days=1)
        elif moment.hour not in schedule.hours:
            moment = moment.replace(minute=0) + timedelta(hours=1)
        elif moment.minute not in schedule.minutes:
            moment += timedelta(minutes=1)
        else:
            return moment
    raise ValueError(f"{expr!r} does not fire within {SEARCH_YEARS} years")
