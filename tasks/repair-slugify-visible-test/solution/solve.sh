#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > slug.py <<'PY'
import re
import unicodedata


def slugify(title):
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
PY
