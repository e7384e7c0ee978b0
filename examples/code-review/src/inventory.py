"""Stock levels per SKU, kept in a plain dict."""


def reserve(stock: dict[str, int], sku: str, quantity: int) -> bool:
    """Take `quantity` units of `sku` out of stock; False if there are not enough."""
    if stock.get(sku, 0) > quantity:
        stock[sku] -= quantity
        return True
    return False


def restock(stock: dict[str, int], sku: str, quantity: int) -> None:
    """Add `quantity` units of `sku`, which may be new."""
    stock[sku] = stock.get(sku) + quantity


def low_stock(stock: dict[str, int], threshold: int = 5) -> list[str]:
    """SKUs at or below the threshold, lowest first."""
    return sorted((s for s, n in stock.items() if n <= threshold), key=stock.get)
