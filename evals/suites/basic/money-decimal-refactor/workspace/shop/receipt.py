from shop.cart import Cart


def render_receipt(cart: Cart) -> str:
    rows = [f"{sku:<10}{qty:>3} x {unit:>7.2f} = {line_total:>8.2f}" for sku, qty, unit, line_total in cart.lines()]
    rows.append(f"{'Subtotal':<26}{cart.subtotal():>8.2f}")
    if cart.discount():
        rows.append(f"{'Discount':<26}{-cart.discount():>8.2f}")
    rows.append(f"{'Tax':<26}{cart.tax():>8.2f}")
    rows.append(f"{'Total':<26}{cart.total():>8.2f}")
    return "\n".join(rows)
