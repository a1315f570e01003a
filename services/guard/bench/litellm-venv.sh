#!/usr/bin/env bash
# Creates (idempotently) the separate venv with LiteLLM's proxy for the guard benchmark.
# Prints the path of its `litellm` command on success; exits non-zero with the reason otherwise.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
home="${BRIDLE_HOME:-$root/.bridle}"
venv="$home/litellm-venv"
lock="$root/infra/python/litellm.lock"
stamp="$venv/.bridle-lock-hash"
key=$(sha256sum "$lock" | cut -c1-16)

if [[ -x "$venv/bin/litellm" && -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then
  echo "$venv/bin/litellm"
  exit 0
fi
echo "litellm-venv: installing LiteLLM's proxy into $venv (once)" >&2
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$lock" >&2
printf '%s' "$key" >"$stamp"
echo "$venv/bin/litellm"
