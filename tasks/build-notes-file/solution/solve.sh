#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
printf 'buy milk\n' > notes.txt
