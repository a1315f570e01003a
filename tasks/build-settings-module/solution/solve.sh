#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
printf 'DEBUG = True\n' > settings.py
