#!/usr/bin/env bash
# Runs every native fuzzer of the module on new inputs (go test alone only
# replays the seed corpora), naming each as it starts and the count at the
# end. A fuzzer that finds a failure writes the input to testdata/fuzz/ and
# fails the run; so does one that runs past FUZZCI_TIMEOUT (default 2m,
# go test -timeout: "test timed out").
#
# Each fuzzer runs for a count of inputs (-fuzztime Nx), never for a time,
# and is never run twice. A time made Go's fuzzing coordinator fail some
# runs that found nothing with a bare "context deadline exceeded"
# (golang/go#75804, three times in session 14): in Go 1.26
# internal/fuzz.CoordinateFuzzing wraps its context in
# WithTimeout(fuzztime), derives the workers' context from it, and when
# the deadline's channel closes calls stop(ctx.Err()), which passes the
# error on as a failure unless it equals the workers' context's error; but
# context's cancel closes the parent's channel before it cancels the
# children, so on a loaded machine the coordinator can read
# DeadlineExceeded from the parent and nil from the child. Go 1.27 fixes
# it (stop also compares ctx.Err()). A count makes no deadline at all
# (CoordinateFuzzing calls WithTimeout only for a time, and stops on the
# count by itself, with no error), so that failure cannot happen and every
# failure left is the fuzzer's. Running under GOTOOLCHAIN=go1.27.3 instead
# would fetch a 76 MB toolchain on every new machine and still end each
# fuzzer on the wall clock, which a loaded CI machine makes a different
# amount of fuzzing each time.
#
# The count is the fuzzer's line in fuzz-ci.counts (about what it ran in
# 3 s here; FUZZCI_EXECS gives every fuzzer that many instead) plus the
# inputs it replays first, which count toward -fuzztime Nx too: its
# testdata/fuzz/ corpus and what earlier runs left in Go's fuzz cache
# ($(go env GOCACHE)/fuzz; go clean -fuzzcache empties it). Its f.Add
# seeds are not counted, so it runs that many fewer new inputs.
set -euo pipefail
GO=${GO:-go}
counts=$(dirname "$0")/fuzz-ci.counts
timeout=${FUZZCI_TIMEOUT:-2m}
cache=$($GO env GOCACHE)/fuzz
mod=$($GO list -m)
n=0 start=$(date +%s)
seen=$(mktemp)
trap 'rm -f "$seen"' EXIT
for pd in $($GO list -f '{{.ImportPath}}={{.Dir}}' ./...); do
  pkg=${pd%%=*} dir=${pd#*=}
  rel=${pkg#"$mod"/}
  [ "$pkg" = "$mod" ] && rel=.
  for f in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go 2>/dev/null); do
    echo "$rel $f" >>"$seen"
    new=${FUZZCI_EXECS:-$(awk -v p="$rel" -v f="$f" '$1 == p && $2 == f { print $3 }' "$counts")}
    if [ -z "$new" ]; then
      new=1000
      echo "fuzz-ci: $rel $f has no line in scripts/fuzz-ci.counts: $new new inputs"
    fi
    corpus=0
    for d in "$cache/$pkg/$f" "$dir/testdata/fuzz/$f"; do
      if [ -d "$d" ]; then
        corpus=$((corpus + $(find "$d" -type f | wc -l)))
      fi
    done
    echo "== $pkg $f ($new new inputs after $corpus replayed)"
    $GO test -run '^$' -fuzz "^$f\$" -fuzztime "$((new + corpus))x" -timeout "$timeout" "$pkg"
    n=$((n + 1))
  done
done
# A line for a fuzzer that is gone (renamed, removed) is only noted.
awk 'NR == FNR { seen[$1 " " $2] = 1; next } /^[^#]/ && NF == 3 && !(($1 " " $2) in seen) { print "fuzz-ci: scripts/fuzz-ci.counts names " $1 " " $2 ", which is gone" }' "$seen" "$counts"
echo "fuzz-ci: $n fuzzers ran on new inputs (counts in scripts/fuzz-ci.counts) in $(($(date +%s) - start)) s"
