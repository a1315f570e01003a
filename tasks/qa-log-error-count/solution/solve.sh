#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
grep -c ' ERROR \[E42\] ' app.log > answer.txt
