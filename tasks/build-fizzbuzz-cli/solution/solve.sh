#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > fizzbuzz.py <<'PY'
import sys

if len(sys.argv) != 2 or not sys.argv[1].isdigit():
    print("usage: fizzbuzz.py N", file=sys.stderr)
    sys.exit(2)
for i in range(1, int(sys.argv[1]) + 1):
    print("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else i)
PY
