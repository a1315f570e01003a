LIMIT = 10


def clamp(n):
    return min(n, LIMIT)
