#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 -c 'import json; c = json.load(open("config.json")); c["version"] = "1.0"; json.dump(c, open("config.json", "w"))'
