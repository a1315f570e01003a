#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
src = open("stats.py").read()
src = src.replace('''    values.sort()
    return values[len(values) // 2]''', '''    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2 == 0:
        return (ordered[mid - 1] + ordered[mid]) / 2
    return ordered[mid]''')
open("stats.py", "w").write(src)
PY
