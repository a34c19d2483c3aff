PRICES = {
    "apple": 0.10,
    "bread": 2.35,
    "cheese": 4.99,
    "coffee": 7.45,
}


def price_of(sku: str) -> float:
    if sku not in PRICES:
        raise KeyError(f"unknown sku: {sku}")
    return PRICES[sku]
