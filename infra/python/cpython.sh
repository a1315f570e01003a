#!/usr/bin/env bash
# Builds CPython 3.13 into $1, for the verifier toolchain: Terminal-Bench 2's tests ask uv for it
# (`uvx -p 3.13 -w pytest==8.4.1 ...`), uv may not download one, and Debian 12 has 3.11. The source
# is Debian 13's python3.13 source package, fetched by name from the Debian archive with apt
# (which checks it against the archive's signed index), so the newest patch release Debian ships
# is the one built. Installed for the prefix the sandbox shows it at (TOOLCHAIN_DIR/cpython).
set -euo pipefail

dest=$1
prefix=/opt/bridle/toolchain/cpython
mirror=${BRIDLE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/lists/partial" "$work/sources" "$work/src"
printf 'Types: deb-src\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "$mirror" >"$work/sources/trixie.sources"
# A private source list and index: the host's own apt configuration is left as it is.
apt=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/sources"
  -o "Dir::State::Lists=$work/lists" -o Debug::NoLocking=1)
"${apt[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
(cd "$work/src" && "${apt[@]}" source --download-only python3.13 >>"$work/apt.log" 2>&1) ||
  { cat "$work/apt.log" >&2; exit 1; }

tar -xf "$(ls "$work"/src/python3.13_*.orig.tar.xz)" -C "$work"
cd "$work"/Python-3.13.*
failed() { echo "cpython: $1 failed; the last lines of its log:" >&2; tail -n 30 "$2" >&2; exit 1; }
./configure --prefix="$prefix" >"$work/configure.log" 2>&1 || failed configure "$work/configure.log"
make -j"$(nproc)" >"$work/make.log" 2>&1 || failed make "$work/make.log"
make install DESTDIR="$work/stage" >"$work/install.log" 2>&1 || failed "make install" "$work/install.log"
# What tests never use: CPython's own test suite, the static library, IDLE; and debug symbols.
staged=$work/stage$prefix
rm -rf "$staged"/lib/python3.13/{test,idlelib,turtledemo} "$staged"/lib/python3.13/config-3.13-*/libpython3.13.a
strip --strip-debug "$staged/bin/python3.13" "$staged"/lib/python3.13/lib-dynload/*.so
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$staged" "$dest"
