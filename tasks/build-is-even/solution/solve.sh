#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > parity.py <<'PY'
def is_even(n):
    return n % 2 == 0
PY
