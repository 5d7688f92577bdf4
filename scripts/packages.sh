#!/usr/bin/env bash
# Prints docs/development.md's package list: every package of every module
# of the repository, one line each, from its package comment (the first
# sentence, as go list gives it; for a package of test files only, the
# first sentence of the "// Package" comment in them). Run from the root:
#   scripts/packages.sh > /tmp/packages.md
# and paste it over the list. internal/archtest checks the list names
# every package and nothing else.
set -euo pipefail
list() {
  go list -f '{{.ImportPath}}|{{.Name}}|{{.Dir}}|{{.Doc}}' ./... | sed 's|^github.com/corepin/corepin/||' |
  while IFS='|' read -r path name dir doc; do
    if [ -z "$doc" ]; then
      # A package of test files only: go list reads no comment there.
      doc=$(awk '/^\/\/ Package /{p=1} p&&/^\/\//{sub(/^\/\/ ?/,""); printf "%s ", $0; next} p{exit}' "$dir"/*_test.go | sed 's/\. .*/./; s/ *$//')
    fi
    doc=${doc#Package "$name" }
    doc=${doc#Command "${path##*/}" }
    echo "- \`$path\` $doc"
  done
}
echo "Main module:"
echo
list
for m in scheduler tools test/kube test/e2evm test/e2enode test/helm; do
  echo
  echo "Module \`$m\`:"
  echo
  (cd "$m" && list)
done
