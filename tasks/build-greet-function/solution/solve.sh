#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > greeting.py <<'PY'
def greet(name):
    return f"Hello, {name}!"
PY
