#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
src = open("tool.sh").read()
src = src.replace("  *)\n", '  version)\n    echo "tool 1.2.0"\n    ;;\n  *)\n')
open("tool.sh", "w").write(src)
PY
