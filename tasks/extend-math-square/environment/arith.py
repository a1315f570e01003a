def double(n):
    return n * 2


def half(n):
    return n / 2
