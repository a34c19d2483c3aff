"""A tiny shop: catalog, cart, discounts, tax and receipts."""

from shop.cart import Cart
from shop.catalog import PRICES, price_of
from shop.receipt import render_receipt

__all__ = ["PRICES", "Cart", "price_of", "render_receipt"]
