#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > matrix.py <<'PY'
def transpose(m):
    return [list(row) for row in zip(*m)]


def multiply(a, b):
    if not a or len(a[0]) != len(b):
        raise ValueError("shapes do not fit")
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def identity(n):
    return [[1 if i == j else 0 for j in range(n)] for i in range(n)]
PY
