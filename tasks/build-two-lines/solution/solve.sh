#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
printf 'red\nblue\n' > colors.txt
