#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > summarize.py <<'PY'
import csv
import sys
from decimal import Decimal

totals = {}
with open(sys.argv[1], newline="") as f:
    for row in csv.DictReader(f):
        units, revenue = totals.get(row["region"], (0, Decimal(0)))
        totals[row["region"]] = (units + int(row["units"]), revenue + int(row["units"]) * Decimal(row["price"]))
for region in sorted(totals):
    units, revenue = totals[region]
    print(f"{region} {units} {revenue:.2f}")
PY
