import re
from dataclasses import dataclass
from datetime import datetime

_LINE = re.compile(
    r'(?P<host>\S+) \S+ \S+ \[(?P<time>[^\]]+)\] "(?P<method>[A-Z]+) (?P<target>\S+)[^"]*" '
    r"(?P<status>\d{3}) (?P<size>\S+)\s*$"
)


@dataclass(frozen=True)
class Record:
    host: str
    time: datetime
    method: str
    path: str
    status: int
    size: int


def parse_line(line: str) -> Record:
    match = _LINE.match(line)
    if not match:
        raise ValueError(f"not a Common Log Format line: {line!r}")
    return Record(
        host=match["host"],
        time=datetime.strptime(match["time"], "%d/%b/%Y:%H:%M:%S %z"),
        method=match["method"],
        path=match["target"],
        status=int(match["status"]),
        size=int(match["size"]),
    )
