from decimal import Decimal

from shop.money import round_cents

TAX_RATE = Decimal("0.0825")


def tax_on(amount: Decimal, rate: Decimal = TAX_RATE) -> Decimal:
    return round_cents(amount * rate)
