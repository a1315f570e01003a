#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat >> messages.py <<'PY'


def goodbye(name):
    return f"Goodbye, {name}!"
PY
