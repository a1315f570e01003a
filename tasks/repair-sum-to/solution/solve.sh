#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
sed -i 's/range(1, n)/range(1, n + 1)/' series.py
