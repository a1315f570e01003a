#!/usr/bin/env bash
# Builds the image every container of the compose layout runs: Debian 12 from Debian's packages
# (mmdebstrap; no registry is reachable), the libraries Node, Python, torch and vLLM load, the
# sandbox's tools (bubblewrap, ripgrep, fd), and this host's Node. Bridle's checkout, its installed
# dependencies and the Python the venv was made from are mounted read-only at run time, so the
# image holds no copy of them and is rebuilt only when this recipe or Node changes.
#   infra/compose/node-image.sh   prints the image's name once it exists
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
home="${BRIDLE_HOME:-$root/.bridle}"
export CONTAINERS_CONF="$home/containers/containers.conf"
export CONTAINERS_STORAGE_CONF="$home/containers/storage.conf"

PACKAGES=(
  bash ca-certificates curl git procps iproute2 python3
  bubblewrap ripgrep fd-find libtcmalloc-minimal4 libnuma1 libgomp1
  libssl3 libffi8 libsqlite3-0 libbz2-1.0 liblzma5 zlib1g libreadline8 libncursesw6 libuuid1 libgdbm6
)
node_bin="$(command -v node)"
recipe=$( (printf '%s\n' "bridle-node-image-1" "${PACKAGES[@]}"; sha256sum "$node_bin") | sha256sum | cut -c1-16)
image="localhost/bridle/node:$recipe"

if podman image exists "$image"; then
  echo "$image"
  exit 0
fi
echo "building $image from Debian's packages (a few minutes, once)" >&2
tar="$home/containers/node-image-$$.tar"
trap 'rm -f "$tar"' EXIT
# A host's own certificate authorities (a TLS proxy's) are trusted inside too, as in task images.
mmdebstrap --quiet --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --customize-hook="copy-in $node_bin /usr/local/bin" \
  --customize-hook='if [ -d /usr/local/share/ca-certificates ]; then cp -r /usr/local/share/ca-certificates/. "$1/usr/local/share/ca-certificates/" && chroot "$1" update-ca-certificates >/dev/null; fi' \
  bookworm "$tar" >&2
podman import --quiet --change "LABEL org.bridle.recipe=$recipe" "$tar" "$image" >/dev/null
echo "$image"
