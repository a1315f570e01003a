ADULT_AGE = 18


def is_adult(age):
    """Whether someone of this age (in years) is an adult."""
    return age > ADULT_AGE
