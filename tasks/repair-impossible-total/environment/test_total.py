from total import total

assert total([]) == 0, total([])
assert total([1, 2, 3]) == 6, total([1, 2, 3])
assert total([5]) == 6, total([5])
print("all tests passed")
