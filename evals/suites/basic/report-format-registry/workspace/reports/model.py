from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    name: str
    quantity: int
    price_cents: int


def format_cents(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"
