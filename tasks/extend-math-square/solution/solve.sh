#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat >> arith.py <<'PY'


def square(n):
    return n * n
PY
