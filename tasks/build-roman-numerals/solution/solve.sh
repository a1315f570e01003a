#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > roman.py <<'PY'
PAIRS = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
         (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(n):
    if not 1 <= n <= 3999:
        raise ValueError(f"{n} is outside 1..3999")
    out = ""
    for value, letters in PAIRS:
        while n >= value:
            out += letters
            n -= value
    return out


def from_roman(s):
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, ch in enumerate(s):
        v = values[ch]
        total += -v if i + 1 < len(s) and values[s[i + 1]] > v else v
    return total
PY
