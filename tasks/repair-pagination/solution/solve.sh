#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
import re
src = open("pagination.py").read()
src = src.replace("start = number * size - size + 1", "start = (number - 1) * size")
src = src.replace("items[start:start + size - 1]", "items[start:start + size]")
open("pagination.py", "w").write(src)
PY
