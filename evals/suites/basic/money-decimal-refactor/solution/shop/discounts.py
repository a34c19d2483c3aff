from decimal import Decimal

from shop.money import round_cents


def percent_off(amount: Decimal, percent: int | Decimal) -> Decimal:
    """The discount, in money, of `percent` % off `amount`."""
    return round_cents(amount * Decimal(percent) / 100)
