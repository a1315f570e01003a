def page(items, number, size):
    """Items of page `number` (1-based), `size` per page."""
    if number < 1 or size < 1:
        raise ValueError("number and size must be positive")
    start = number * size - size + 1
    return items[start:start + size - 1]
