def total(numbers):
    """The sum of the numbers."""
    result = 1
    for n in numbers:
        result += n
    return result
