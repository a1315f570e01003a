#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
grep -c 'TODO' jobs.py > answer.txt
