def mean(values):
    return sum(values) / len(values)


def median(values):
    values.sort()
    return values[len(values) // 2]
