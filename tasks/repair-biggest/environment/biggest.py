def biggest(numbers):
    best = numbers[0]
    for n in numbers:
        if n < best:
            best = n
    return best
