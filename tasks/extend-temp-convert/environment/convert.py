def c_to_f(c):
    """Degrees Celsius to degrees Fahrenheit."""
    return c * 9 / 5 + 32
