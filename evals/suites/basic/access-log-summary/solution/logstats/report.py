from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from logstats.parse import parse_line


@dataclass
class Summary:
    requests: int = 0
    bytes_sent: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    malformed: int = 0
    paths: Counter = field(default_factory=Counter)

    def top_paths(self, n: int) -> list[tuple[str, int]]:
        return sorted(self.paths.items(), key=lambda item: (-item[1], item[0]))[:n]


def summarize(lines: Iterable[str]) -> Summary:
    summary = Summary()
    for line in lines:
        if not line.strip():
            continue
        try:
            record = parse_line(line)
        except ValueError:
            summary.malformed += 1
            continue
        summary.requests += 1
        summary.bytes_sent += record.size
        summary.statuses[record.status] = summary.statuses.get(record.status, 0) + 1
        summary.paths[record.path] += 1
    return summary
