#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
cat > flatten.js <<'JS'
function flatten(value, prefix = "", out = {}) {
  const nested = value !== null && typeof value === "object";
  if (!nested || Object.keys(value).length === 0) {
    if (prefix) out[prefix] = value;
    return out;
  }
  for (const [key, inner] of Object.entries(value)) flatten(inner, prefix ? `${prefix}.${key}` : key, out);
  return out;
}
module.exports = { flatten };
JS
