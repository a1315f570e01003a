#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
sed -i 's/name="\$2"/name="$1"/' greet.sh
