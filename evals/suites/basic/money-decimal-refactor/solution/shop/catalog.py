from decimal import Decimal

from shop.money import to_money

PRICES: dict[str, Decimal] = {
    "apple": to_money("0.10"),
    "bread": to_money("2.35"),
    "cheese": to_money("4.99"),
    "coffee": to_money("7.45"),
}


def price_of(sku: str) -> Decimal:
    if sku not in PRICES:
        raise KeyError(f"unknown sku: {sku}")
    return PRICES[sku]
