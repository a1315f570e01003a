#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
import csv
from collections import defaultdict
sums = defaultdict(list)
for row in csv.DictReader(open("temperatures.csv")):
    sums[row["city"]].append(float(row["celsius"]))
best = max(sums, key=lambda c: sum(sums[c]) / len(sums[c]))
open("answer.txt", "w").write(best + "\n")
PY
