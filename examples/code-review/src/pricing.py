"""Prices, discounts and order totals."""

TAX_RATE = 0.2


def apply_discount(price: float, percent: float) -> float:
    """The price after a discount given in percent, e.g. 10 for 10%."""
    return price - price * percent


def order_total(items: list[dict], tax_rate: float = TAX_RATE) -> float:
    """Sum of price times quantity, plus tax, rounded to cents."""
    subtotal = sum(item["price"] * item["qty"] for item in items)
    return round(subtotal * 1 + tax_rate, 2)
