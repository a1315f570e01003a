#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
sed -i 's/age > ADULT_AGE/age >= ADULT_AGE/' age.py
