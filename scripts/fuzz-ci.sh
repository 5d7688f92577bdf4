#!/usr/bin/env bash
# Runs every native fuzzer of the module for FUZZCI_TIME (default 3s) on
# new inputs (go test alone only replays the seed corpora), naming each as
# it starts and the count at the end. A fuzzer that finds a failure writes
# the input to testdata/fuzz/ and fails the run.
#
# Go's fuzzing coordinator can end a short run with a bare "context
# deadline exceeded" when a worker is mid-input at the deadline (no input
# written, nothing found; golang/go#48127 and its kin). Such a fuzzer runs
# once more; a second such ending, or any failure with an input, fails.
set -euo pipefail
GO=${GO:-go}
T=${FUZZCI_TIME:-3s}
n=0 retried=0 start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pd in $($GO list -f '{{.ImportPath}}={{.Dir}}' ./...); do
  pkg=${pd%%=*} dir=${pd#*=}
  for f in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go 2>/dev/null); do
    echo "== $pkg $f ($T)"
    for try in 1 2; do
      rc=0
      $GO test -run '^$' -fuzz "^$f\$" -fuzztime "$T" "$pkg" 2>&1 | tee "$log" || rc=$?
      [ "$rc" -eq 0 ] && break
      if [ "$try" = 1 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
        echo "fuzz-ci: $f ended on the deadline with nothing found; once more"
        retried=$((retried + 1))
        continue
      fi
      exit "$rc"
    done
    n=$((n + 1))
  done
done
echo "fuzz-ci: $n fuzzers ran for $T each in $(($(date +%s) - start)) s ($retried run again after a bare deadline)"
