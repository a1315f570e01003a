def double(n):
    return n * 2


def triple(n):
    return n * 3


def halve(n):
    return n / 2


def sextuple(n):
    return double(triple(n))
