#!/usr/bin/env bash
# be-vs-plain: does `corepin run --qos BE` leave a latency-sensitive service
# alone, where the same batch started plainly does not?
#
# Starts corepin's fixed-CPU-cost HTTP service (3 ms of CPU per request) as
# a plain process, then measures its latency with wrk in three situations,
# interleaved, REPEATS times each:
#   alone  - nothing else running
#   plain  - a CPU-saturating batch started plainly beside it
#   be     - the same batch started with corepin run --qos BE
# and prints the median p50/p99 of each and the ratios to alone.
#
# Usage: scripts/be-vs-plain.sh [REPEATS] [SECONDS]   (root; wrk, stress-ng)
#        BATCH="make -j4" scripts/be-vs-plain.sh   (any other batch)
set -euo pipefail
repeats=${1:-5}
secs=${2:-8}
corepin=${COREPIN:-$(dirname "$0")/../bin/corepin}
conns=${CONNS:-2}
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$corepin" ] || { echo "no corepin binary at $corepin: run make build" >&2; exit 1; }

work=$(mktemp -d)
svc_pid=
batch_pids=()
cleanup() {
  for p in "${batch_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$svc_pid" ] && kill "$svc_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$corepin" serve cpu --listen 127.0.0.1:0 --cost 3ms > "$work/addr" &
svc_pid=$!
for _ in $(seq 50); do [ -s "$work/addr" ] && break; sleep 0.1; done
url="http://$(head -1 "$work/addr")/"

# The batch is the issue's own command line, BATCH (default: stress-ng with
# 4 CPU hogs, more than this machine has CPUs), started plainly or as
# `corepin run --qos BE -- $BATCH`, exactly as a user types it.
read -r -a batch <<<"${BATCH:-stress-ng --cpu 4}"
command -v "${batch[0]}" >/dev/null || { echo "${batch[0]} not installed (apt-get install stress-ng)" >&2; exit 1; }
start_batch() {
  batch_pids=()
  case $1 in
    plain)
      "${batch[@]}" >/dev/null 2>&1 &
      batch_pids+=($!) ;;
    be)
      "$corepin" run --qos BE -- "${batch[@]}" >/dev/null 2>&1 &
      batch_pids+=($!) ;;
  esac
  [ "$1" = alone ] || sleep 1
}

stop_batch() {
  for p in "${batch_pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${batch_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  batch_pids=()
}

measure() { # prints "p50_ms p99_ms"
  "$corepin" load --wrk --url "$url" --duration "${secs}s" --warmup 1s --connections "$conns" -o json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["p50_ms"], r["p99_ms"])'
}

for r in $(seq "$repeats"); do
  for mode in $(printf 'alone\nplain\nbe\n' | shuf); do
    start_batch "$mode"
    echo "$mode $(measure)" | tee -a "$work/results" >&2
    stop_batch
  done
done

python3 - "$work/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for mode in ("alone", "plain", "be"):
    p50 = [float(r[1]) for r in rows if r[0] == mode]
    p99 = [float(r[2]) for r in rows if r[0] == mode]
    med[mode] = (statistics.median(p50), statistics.median(p99), min(p99), max(p99))
a = med["alone"][1]
print(f"{'batch':8} {'p50':>8} {'p99':>8} {'p99 range':>16} {'p99/alone':>10}")
for mode, (p50, p99, lo, hi) in med.items():
    print(f"{mode:8} {p50:7.2f}ms {p99:7.2f}ms {lo:7.2f}-{hi:<7.2f} {p99 / a:9.2f}x")
PY
