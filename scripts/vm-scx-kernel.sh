#!/usr/bin/env bash
# vm-scx-kernel: a bzImage with sched_ext for the qemu tests (make e2e-vm-scx).
#
# Debian's 6.12 kernels leave CONFIG_SCHED_CLASS_EXT off. This builds one
# from Debian's own inputs: the linux-source-6.12 package and the config of
# the linux-image-<version>-cloud-amd64 package of the same version, plus
# CONFIG_SCHED_CLASS_EXT=y (BPF, the BPF JIT and BTF are on in that config
# already), bzImage only. The result is cached by version in
#   $COREPIN_CACHE/vm/linux-<version>-cloud-scx/bzImage
# and the script prints that path on stdout (everything else goes to stderr).
#
# A prebuilt copy of the same kernel, $COREPIN_SHARED/vm-kernels/
# bzImage-<version>-cloud-scx (default ../shared beside the repository),
# seeds the cache when it is there: the build takes about 20 minutes of
# `make -j2 bzImage` on a 2-CPU machine, 25-40 beside other work.
#
# Usage: scripts/vm-scx-kernel.sh [--cached-only] [VERSION]
#   VERSION       a Debian kernel version such as 6.12.117 (default: the
#                 seed's version when a seed is there, else the version of
#                 Debian's current linux-source-6.12)
#   --cached-only print the cached (or seeded) kernel's path, or exit 3
#                 with one line saying the cache is cold; never build
# Building needs root for apt-get (linux-source-6.12, bc, flex, bison,
# libelf-dev, libssl-dev, dwarves) and about 5 GB of free disk.
set -euo pipefail

cached_only=
case ${1:-} in
  --cached-only) cached_only=1; shift ;;
  -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "vm-scx-kernel: unknown flag $1 (see --help)" >&2; exit 2 ;;
esac
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${COREPIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/corepin}/vm
shared=${COREPIN_SHARED:-$repo/../shared}
jobs=${COREPIN_KERNEL_JOBS:-2}

# The seed's version, from its name.
seed_version() {
  local f
  for f in "$shared"/vm-kernels/bzImage-*-cloud-scx; do
    [ -f "$f" ] || continue
    f=${f##*/bzImage-}; echo "${f%-cloud-scx}"; return 0
  done
  return 1
}

version=${1:-}
if [ -z "$version" ]; then
  version=$(seed_version || true)
fi
if [ -z "$version" ]; then
  if ! command -v apt-cache >/dev/null; then
    echo "vm-scx-kernel: no VERSION given, no seed in $shared/vm-kernels and no apt-cache to ask Debian's" >&2
    exit 2
  fi
  # "6.12.117-1~deb12u1" -> "6.12.117"
  version=$(apt-cache policy linux-source-6.12 | sed -n 's/^ *Candidate: \([0-9.]*\)-.*/\1/p')
  if [ -z "$version" ]; then
    echo "vm-scx-kernel: apt-cache knows no linux-source-6.12 (run apt-get update; bookworm or newer)" >&2
    exit 1
  fi
fi
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "vm-scx-kernel: version $version is not of the form 6.12.117" >&2
  exit 2
fi

dir=$cache/linux-$version-cloud-scx
out=$dir/bzImage
if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi
seed=$shared/vm-kernels/bzImage-$version-cloud-scx
if [ -s "$seed" ]; then
  mkdir -p "$dir"
  install -m 0644 "$seed" "$out.tmp" && mv "$out.tmp" "$out"
  if [ -f "$shared/vm-kernels/config-$version-cloud-scx.gz" ]; then
    install -m 0644 "$shared/vm-kernels/config-$version-cloud-scx.gz" "$dir/config.gz"
  fi
  echo "vm-scx-kernel: seeded $out from $seed" >&2
  echo "$out"
  exit 0
fi
if [ -n "$cached_only" ]; then
  echo "vm-scx-kernel: cache cold: no $out and no seed $seed (scripts/vm-scx-kernel.sh builds it in about 20-40 minutes)" >&2
  exit 3
fi

# Build. The source package must be of the same version as the config.
have=$(apt-cache policy linux-source-6.12 2>/dev/null | sed -n 's/^ *Candidate: \([0-9.]*\)-.*/\1/p')
if [ "$have" != "$version" ]; then
  echo "vm-scx-kernel: Debian offers linux-source-6.12 $have, not $version: run without VERSION to build $have" >&2
  exit 1
fi
echo "vm-scx-kernel: building linux $version with sched_ext (about 20-40 minutes)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends linux-source-6.12 bc flex bison libelf-dev libssl-dev dwarves \
  make gcc libc6-dev xz-utils >&2
work=$(mktemp -d "${TMPDIR:-/tmp}/vm-scx-kernel.XXXXXX")
trap 'rm -rf "$work"' EXIT
img=$(apt-cache depends linux-image-6.12-cloud-amd64 | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -n 1)
case $img in
  linux-image-$version+*) ;;
  *) echo "vm-scx-kernel: linux-image-6.12-cloud-amd64 depends on '$img', not version $version" >&2; exit 1 ;;
esac
(cd "$work" && apt-get download "$img" >&2 && dpkg -x "$img"_*.deb img)
config=$(ls "$work"/img/boot/config-* | head -n 1)
tar -xf /usr/src/linux-source-6.12.tar.xz -C "$work"
src=$work/linux-source-6.12
cp "$config" "$src/.config"
(
  cd "$src"
  # Module signing keys and the modules' BTF are for a distribution's
  # packages; a bzImage booted with an initramfs needs neither.
  ./scripts/config --enable SCHED_CLASS_EXT --disable MODULE_SIG \
    --set-str SYSTEM_TRUSTED_KEYS "" --set-str SYSTEM_REVOCATION_KEYS "" --disable DEBUG_INFO_BTF_MODULES
  make olddefconfig >&2
  grep -qx 'CONFIG_SCHED_CLASS_EXT=y' .config || { echo "vm-scx-kernel: olddefconfig dropped CONFIG_SCHED_CLASS_EXT" >&2; exit 1; }
  nice -n 10 make -j"$jobs" bzImage >&2
)
mkdir -p "$dir"
cp "$src/arch/x86/boot/bzImage" "$out.tmp" && mv "$out.tmp" "$out"
gzip -c "$src/.config" > "$dir/config.gz"
echo "vm-scx-kernel: built $out" >&2
echo "$out"
