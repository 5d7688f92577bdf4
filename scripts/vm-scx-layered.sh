#!/usr/bin/env bash
# vm-scx-layered: scx_layered, the sched_ext scheduler corepin drives, for
# the qemu tests (make e2e-vm-scx).
#
# scx_layered is built from its crate with cargo (clang >= 18 compiles its
# BPF; Debian 12's default clang 14 is refused, so clang-19 from the
# archive is used) and cached by version in
#   $COREPIN_CACHE/scx-<version>/bin/scx_layered
# The script prints that path on stdout (everything else goes to stderr).
# A build took about 8 minutes of both CPUs of a quiet 2-CPU machine and 27
# at a load average of 10-19 (../shared/vm-testing.md, docs/reference/
# sched-ext.md); it runs at nice 10.
#
# Usage: scripts/vm-scx-layered.sh [--cached-only] [VERSION]
#   VERSION       the scx_layered crate version (default below: the one
#                 docs/reference/sched-ext.md found to attach on the
#                 6.12 kernel of scripts/vm-scx-kernel.sh)
#   --cached-only print the cached binary's path, or exit 3 with one line
#                 saying the cache is cold; never build
# Building needs cargo (rustup), and root for apt-get (clang-19, llvm-19,
# libclang1-19, libelf-dev, zlib1g-dev, pkg-config) where they are missing.
set -euo pipefail

default_version=1.1.4
cached_only=
case ${1:-} in
  --cached-only) cached_only=1; shift ;;
  -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "vm-scx-layered: unknown flag $1 (see --help)" >&2; exit 2 ;;
esac
version=${1:-$default_version}
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "vm-scx-layered: version $version is not of the form 1.1.4" >&2
  exit 2
fi
cache=${COREPIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/corepin}
root=$cache/scx-$version
out=$root/bin/scx_layered
if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi
if [ -n "$cached_only" ]; then
  echo "vm-scx-layered: cache cold: no $out (scripts/vm-scx-layered.sh $version builds it: about 8 minutes on an idle 2-CPU machine, 27 at a load average of 10-19)" >&2
  exit 3
fi
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
if ! [ -x "$cargo" ]; then
  echo "vm-scx-layered: no cargo (install Rust with rustup)" >&2
  exit 1
fi
missing=()
command -v clang-19 >/dev/null || missing+=(clang-19 llvm-19)
# libclang1-19 is the libclang that bindgen loads to read the BPF
# interface headers.
for p in libclang1-19 libelf-dev zlib1g-dev pkg-config; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "vm-scx-layered: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
echo "vm-scx-layered: building scx_layered $version (about 8 minutes on an idle 2-CPU machine, 27 at a load average of 10-19)" >&2
# A shared target directory lets a second version reuse the dependencies
# both lock to the same versions.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache/scx-target}
if [ -z "${LIBCLANG_PATH:-}" ] && [ -d /usr/lib/llvm-19/lib ]; then
  export LIBCLANG_PATH=/usr/lib/llvm-19/lib
fi
BPF_CLANG=clang-19 nice -n 10 "$cargo" install --locked "scx_layered@$version" --root "$root.tmp" >&2
rm -rf "$root"
mv "$root.tmp" "$root"
echo "vm-scx-layered: built $out" >&2
echo "$out"
