#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
sed -i 's/return n + 2/return n * 2/' calc.py
