#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > duration.py <<'PY'
import re

PATTERN = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text):
    match = PATTERN.match(text)
    if not match or not text:
        raise ValueError(f"not a duration: {text!r}")
    h, m, s = (int(g) if g else 0 for g in match.groups())
    return h * 3600 + m * 60 + s
PY
