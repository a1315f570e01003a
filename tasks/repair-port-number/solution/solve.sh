#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
printf 'port=8080\n' > server.txt
