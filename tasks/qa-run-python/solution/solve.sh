#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 compute.py > answer.txt
