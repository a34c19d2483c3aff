import re
from dataclasses import dataclass
from datetime import datetime

_LINE = re.compile(
    r'(?P<host>\S+) \S+ \S+ \[(?P<time>[^\]]+)\] "(?P<method>[A-Z]+) (?P<target>\S+)[^"]*" '
    r"(?P<status>\d{3}) (?P<size>\d+|-)\s*$"
)


@dataclass(frozen=True)
class Record:
    host: str
    time: datetime
    method: str
    path: str
    status: int
    size: int
    query: str = ""


def parse_line(line: str) -> Record:
    match = _LINE.match(line)
    if not match:
        raise ValueError(f"not a Common Log Format line: {line!r}")
    try:
        time = datetime.strptime(match["time"], "%d/%b/%Y:%H:%M:%S %z")
    except ValueError as exc:
        raise ValueError(f"bad timestamp in {line!r}: {exc}") from None
    path, _, query = match["target"].partition("?")
    return Record(
        host=match["host"],
        time=time,
        method=match["method"],
        path=path,
        status=int(match["status"]),
        size=0 if match["size"] == "-" else int(match["size"]),
        query=query,
    )
