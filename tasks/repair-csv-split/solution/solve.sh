#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > csvline.py <<'PY'
def split_line(line):
    # Fields of one CSV line.
    fields, field, quoted, i = [], "", False, 0
    while i < len(line):
        ch = line[i]
        if quoted:
            if ch == '"' and line[i + 1:i + 2] == '"':
                field += '"'
                i += 1
            elif ch == '"':
                quoted = False
            else:
                field += ch
        elif ch == '"':
            quoted = True
        elif ch == ",":
            fields.append(field)
            field = ""
        else:
            field += ch
        i += 1
    fields.append(field)
    return fields
PY
