#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > wordcount.py <<'PY'
import json
import sys


def count(text):
    return {"lines": text.count("\n"), "words": len(text.split()), "chars": len(text)}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        print(json.dumps(count(f.read())))
PY
