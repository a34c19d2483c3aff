TAX_RATE = 0.0825


def tax_on(amount: float, rate: float = TAX_RATE) -> float:
    return round(amount * rate, 2)
