#!/usr/bin/env bash
# make image-check: the same commit gives the same bytes. Runs make dist
# here, then again in a fresh clone of HEAD at another path (so -trimpath,
# fixed times and no VCS stamp are what make them equal, not a shared
# directory), and compares the two SHA256SUMS: both binaries, the SBOM,
# both docker-archives and the OCI layout's index.json (which names the
# image index by its digest). The tree must be clean: uncommitted changes
# are not in the clone.
set -euo pipefail
GO=${GO:-go}
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "image-check: the tree has uncommitted changes; commit them first (the second build is of HEAD)" >&2
  exit 2
fi
clone=$(mktemp -d)
trap 'rm -rf "$clone"' EXIT
make -s dist GO="$GO" >/dev/null
git clone -q --no-local . "$clone/corepin"
git -C "$clone/corepin" checkout -q --detach "$(git rev-parse HEAD)"
make -s -C "$clone/corepin" dist GO="$GO" >/dev/null
if ! diff -u dist/SHA256SUMS "$clone/corepin/dist/SHA256SUMS"; then
  echo "image-check: two builds of $(git rev-parse HEAD) differ (above: here, then a fresh clone)" >&2
  exit 1
fi
echo "image-check: two builds of $(git rev-parse --short HEAD) are identical:"
cat dist/SHA256SUMS
sed -n 's/.*"digest": "\(sha256:[0-9a-f]*\)".*/image index: \1/p' dist/image/oci/index.json
