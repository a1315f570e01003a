#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
sed -i 's/^LIMIT = 10$/LIMIT = 20/' app.py
