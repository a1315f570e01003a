#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
src = open("calc.py").read()
src = src.replace('''    "/": lambda a, b: a / b,''', '''    "/": lambda a, b: a / b,
    "^": lambda a, b: a**b,
    "%": lambda a, b: a % b,''')
open("calc.py", "w").write(src)
PY
