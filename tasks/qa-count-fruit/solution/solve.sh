#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
grep -cx 'apple' fruits.txt > answer.txt
