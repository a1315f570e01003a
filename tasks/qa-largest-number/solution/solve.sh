#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
sort -n values.txt | tail -n 1 > answer.txt
