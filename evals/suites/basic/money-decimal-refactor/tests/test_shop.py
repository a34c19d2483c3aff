from decimal import Decimal

import pytest

from shop import PRICES, Cart, render_receipt
from shop.discounts import percent_off
from shop.tax import tax_on


def sample_cart():
    cart = Cart()
    cart.add("bread", 2)
    cart.add("cheese")
    cart.apply_discount(10)
    return cart


def test_receipt_format():
    assert render_receipt(sample_cart()) == (
        "bread       2 x    2.35 =     4.70\n"
        "cheese      1 x    4.99 =     4.99\n"
        "Subtotal                      9.69\n"
        "Discount                     -0.97\n"
        "Tax                           0.72\n"
        "Total                         9.44"
    )


def test_item_count_and_unknown_sku():
    cart = sample_cart()
    assert cart.item_count() == 3
    with pytest.raises(KeyError):
        cart.add("caviar")


def test_to_money():
    from shop.money import to_money

    assert to_money("0.10") == Decimal("0.10")
    assert str(to_money(3)) == "3.00"
    assert to_money(Decimal("1.005")) == Decimal("1.01")
    with pytest.raises(TypeError):
        to_money(0.1)
    with pytest.raises(ValueError):
        to_money("ten")


def test_catalog_prices_are_decimals():
    assert all(isinstance(price, Decimal) for price in PRICES.values())
    assert PRICES["bread"] == Decimal("2.35")


def test_cart_amounts_are_exact():
    cart = Cart()
    cart.add("apple", 3)
    assert cart.subtotal() == Decimal("0.30")
    assert isinstance(cart.subtotal(), Decimal)
    assert cart.lines() == [("apple", 3, Decimal("0.10"), Decimal("0.30"))]


def test_half_up_rounding():
    assert percent_off(Decimal("0.50"), 25) == Decimal("0.13")
    assert tax_on(Decimal("1.00"), Decimal("0.125")) == Decimal("0.13")


def test_total_with_discount_and_tax():
    cart = sample_cart()
    amounts = [cart.subtotal(), cart.discount(), cart.tax(), cart.total()]
    assert amounts == [Decimal("9.69"), Decimal("0.97"), Decimal("0.72"), Decimal("9.44")]
    assert all(isinstance(a, Decimal) and a.as_tuple().exponent == -2 for a in amounts)
