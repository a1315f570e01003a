#!/usr/bin/env bash
# Bridle's test suite: lint, strict types, then every package's tests through turbo. The
# end-to-end tests in test/ bring up the real embedded stack on their own ports and stop it.
# Run it through ./bridle test, which installs whatever is missing first.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
started=$(date +%s)
# The suite builds task images on five releases: past 3 GiB of unpacked images, those it has not
# used for 15 minutes are removed, so its disk stays bounded (a setting of the caller's wins).
export BRIDLE_IMAGE_CACHE_GB="${BRIDLE_IMAGE_CACHE_GB:-3}"

echo "==> lint (biome)"
pnpm exec biome check .
echo "==> typecheck"
pnpm exec turbo run typecheck --output-logs=errors-only
echo "==> tests"
find . -name test-results.json -not -path '*/node_modules/*' -delete
status=0
pnpm exec turbo run test --concurrency=1 --continue --output-logs=full -- --reporter=default --reporter=json \
  --outputFile=test-results.json || status=$?
node --import tsx infra/test-summary.ts "$((($(date +%s) - started)))" "$status" || status=1
exit "$status"
