def double(n):
    return n + 2


def triple(n):
    return n * 3
