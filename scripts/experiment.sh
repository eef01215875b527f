#!/usr/bin/env bash
# The full-length replica-loss experiment (SPEC §1, the pinned `experiment` profile) on the local
# testbed: RUNS recordings of one catalogue scenario, about 17 minutes each (60 s warm-up, 300 s
# baseline, 600 s degradation-and-recovery window, 60 s cooldown), then the campaign report over
# them (N = 5 by default, as §7 sizes it). Nothing here is time-compressed, so these are the runs
# whose reports are not labelled NOT PUBLISHABLE by the profile.
#
#   scripts/experiment.sh [SCENARIO] [RUNS] [OUT]
#   scripts/experiment.sh scenarios/catalogue/replica-loss-black-hole.toml 5 experiment-out
#
# The black-hole scenario needs root, iproute2 and iptables (network namespaces). Five runs of one
# variant take about 85 minutes; run both variants for the headline's comparison.
set -euo pipefail
cd "$(dirname "$0")/.."

scenario="${1:-scenarios/catalogue/replica-loss-clean-delete.toml}"
runs="${2:-5}"
out="${3:-experiment-out}"
name="$(basename "$scenario" .toml)"

cargo build --release --locked
bin=target/release/percentes
mkdir -p "$out"
echo "== $name: $runs full-length runs (about $((runs * 17)) minutes) into $out/"
journals=()
for i in $(seq 1 "$runs"); do
    dir="$out/$name-$i"
    echo "== run $i of $runs: $dir (started $(date -u +%H:%M:%SZ))"
    # Exit 2 (a gate failed) still leaves a journal the campaign lists as dropped, never imputed.
    set +e
    "$bin" scenario run "$scenario" --experiment --force -o "$dir"
    code=$?
    set -e
    if [ "$code" -ne 0 ] && [ "$code" -ne 2 ]; then
        echo "run $i failed to record (exit $code); stopping" >&2
        exit "$code"
    fi
    journals+=("$dir/run.pj")
done
echo "== campaign over ${#journals[@]} runs"
"$bin" campaign "${journals[@]}" -o "$out/campaign-$name"
