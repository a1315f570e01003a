#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
printf 'cherry\n' >> fruits.txt
