#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat >> convert.py <<'PY'


def f_to_c(f):
    """Degrees Fahrenheit to degrees Celsius."""
    return (f - 32) * 5 / 9
PY
