"""Money is Decimal, rounded to cents half-up; floats are refused so they cannot creep back in."""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

CENT = Decimal("0.01")


def round_cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def to_money(value: str | int | Decimal) -> Decimal:
    if isinstance(value, float):
        raise TypeError("money must not be a float; pass a string, int or Decimal")
    try:
        return round_cents(Decimal(value))
    except InvalidOperation:
        raise ValueError(f"not an amount of money: {value!r}") from None
