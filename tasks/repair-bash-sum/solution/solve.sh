#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > sum.sh <<'SH'
#!/usr/bin/env bash
total=0
while read -r n || [ -n "$n" ]; do
  [ -z "${n//[[:space:]]/}" ] && continue
  total=$((total + n))
done < "$1"
echo "$total"
SH
