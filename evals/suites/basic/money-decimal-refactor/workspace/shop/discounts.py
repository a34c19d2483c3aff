def percent_off(amount: float, percent: float) -> float:
    """The discount, in money, of `percent` % off `amount`."""
    return round(amount * percent / 100, 2)
