#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
src = open("strings.js").read()
src = src.replace("module.exports = { reverse, capitalize };", '''const SMALL = new Set(["a", "an", "the", "of", "and", "in", "on"]);

function titleCase(text) {
  return text
    .split(" ")
    .map((word, i) => (i > 0 && SMALL.has(word.toLowerCase()) ? word.toLowerCase() : capitalize(word)))
    .join(" ");
}

module.exports = { reverse, capitalize, titleCase };''')
open("strings.js", "w").write(src)
PY
