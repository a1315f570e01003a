total = 0
for i in range(1, 13):
    total += i * i
print(total)
