#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > lower.sh <<'SH'
#!/usr/bin/env bash
set -u
dir="$1"
for path in "$dir"/*; do
  [ -f "$path" ] || continue
  name="$(basename "$path")"
  lower="${name,,}"
  [ "$name" = "$lower" ] && continue
  if [ -e "$dir/$lower" ]; then
    echo "skip: $name" >&2
    continue
  fi
  mv -- "$path" "$dir/$lower"
done
SH
