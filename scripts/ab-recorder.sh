#!/usr/bin/env bash
# A/B of two recorder builds (BENCHMARKS.md, issue 20): ROUNDS alternating 10 s runs of each
# binary against the same nginx at RATE rps, deterministic arrivals, plain responses; nginx on
# core 0, the recorder (one worker, canary on) on core 1. Prints, per run, CPU per request
# (/usr/bin/time user + system over the requests) and the journal's send skew (dispatch minus
# intended) p50 / p99 / max, then each binary's mean CPU per request.
# B_ARGS (environment) adds record arguments to B's runs only, so one binary can be A/B'd
# against itself with an option (B_ARGS=--no-canary).
# Usage: scripts/ab-recorder.sh BIN_A BIN_B [ROUNDS] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fixed-nginx.sh
a=${1:?the A binary}
b=${2:?the B binary}
rounds=${3:-3}
rate=${4:-10000}
work=$(mktemp -d /var/tmp/ab-recorder.XXXXXX)
trap '[ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT
port=18191
start_fixed_nginx "$work" $port
fixed_run_config $port "$rate" 42 > "$work/run.toml"
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    bin=$a
    extra=()
    if [ "$side" = B ]; then
      bin=$b
      read -r -a extra <<< "${B_ARGS:-}"
    fi
    /usr/bin/time -f "%U %S" -o "$work/cpu" taskset -c 1 "$bin" record "$work/run.toml" \
      -o "$work/run.pj" --force --quiet "${extra[@]}" > /dev/null 2>&1 || true
    # The last line: a run that exits non-zero (its gates failed) puts a line of its own first.
    cpu=$(awk 'END {print $1 + $2}' "$work/cpu")
    "$bin" inspect "$work/run.pj" --records --kind request | python3 -c "
import json, sys
skew, new, n = [], 0, 0
for line in sys.stdin:
    r = json.loads(line)
    n += 1
    new += not r['connection_reused']
    if r['dispatched_ns'] is not None:
        skew.append(r['dispatched_ns'] - r['intended_ns'])
skew.sort()
q = lambda p: skew[min(len(skew) - 1, int(p * len(skew)))] / 1e3
print(f'$side round $round: {n} requests, CPU {$cpu / max(n, 1) * 1e6:.1f} us a request, skew p50 {q(0.5):.0f} us, p99 {q(0.99):.0f} us, max {skew[-1] / 1e3:.0f} us, {new} connects')
"
  done
done | tee "$work/out"
for side in A B; do
  grep "^$side " "$work/out" | sed 's/.*CPU \([0-9.]*\) us.*/\1/' |
    awk -v s="$side" '{t += $1; n++} END {printf "%s: mean CPU %.1f us a request over %d runs\n", s, t / n, n}'
done
