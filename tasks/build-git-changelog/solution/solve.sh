#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > changelog.sh <<'SH'
#!/usr/bin/env bash
set -euo pipefail
git -C "$1" log --no-merges --format='%s' | grep -viE '^wip' | sed 's/^/- /' || true
SH
