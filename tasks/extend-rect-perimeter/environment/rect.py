def area(width, height):
    """The area of a width x height rectangle."""
    return width * height
