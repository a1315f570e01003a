with open("answer.txt", encoding="utf-8") as f:
    answer = f.read().strip()
assert answer == "5", f"expected 5, got {answer!r}"
print("correct")
