#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > count.sh <<'SH'
#!/usr/bin/env bash
for i in 1 2 3 4 5; do
  echo "$i"
done
SH
