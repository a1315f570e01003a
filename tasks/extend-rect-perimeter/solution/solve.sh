#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat >> rect.py <<'PY'


def perimeter(width, height):
    """The perimeter of a width x height rectangle."""
    return 2 * (width + height)
PY
