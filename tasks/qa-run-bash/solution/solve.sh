#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
bash total.sh > answer.txt
