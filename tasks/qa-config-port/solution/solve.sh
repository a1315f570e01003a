#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
import configparser
c = configparser.ConfigParser()
c.read(["config/defaults.ini", "config/override.ini"])
open("answer.txt", "w").write(c["billing"]["port"] + "\n")
PY
