from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    level: str  # "info", "warning" or "error"
    title: str
    body: str
