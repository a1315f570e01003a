#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 -c 'import json; c = json.load(open("package.json")); c["author"] = "sam"; json.dump(c, open("package.json", "w"))'
