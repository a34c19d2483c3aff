from shop.catalog import price_of
from shop.discounts import percent_off
from shop.tax import tax_on


class Cart:
    def __init__(self) -> None:
        self._items: dict[str, int] = {}
        self._discount_percent = 0

    def add(self, sku: str, qty: int = 1) -> None:
        price_of(sku)  # unknown skus fail here, not at checkout
        self._items[sku] = self._items.get(sku, 0) + qty

    def apply_discount(self, percent: int) -> None:
        self._discount_percent = percent

    def lines(self) -> list[tuple[str, int, float, float]]:
        return [(sku, qty, price_of(sku), price_of(sku) * qty) for sku, qty in self._items.items()]

    def item_count(self) -> int:
        return sum(self._items.values())

    def subtotal(self) -> float:
        return sum(line[3] for line in self.lines())

    def discount(self) -> float:
        return percent_off(self.subtotal(), self._discount_percent)

    def tax(self) -> float:
        return tax_on(self.subtotal() - self.discount())

    def total(self) -> float:
        return self.subtotal() - self.discount() + self.tax()
