#!/usr/bin/env bash
# The clean-delete study against a real serving engine: two vLLM replicas (the CPU build and the
# tiny offline model of ../shared/real-targets/vllm-cpu.sh) behind percentes' router, a SIGKILL of
# replica-1 at T_inject, the router told of it after a detection delay, replica-1 restarted and
# put back once vLLM's /health answers. Recorded, verified and analyzed into OUT.
#
#   scripts/vllm-study.sh [OUT]
#   VLLM_SH=../shared/real-targets/vllm-cpu.sh LAMBDA_MAX=2.0 FACTOR=5 BIN=target/debug/percentes \
#     scripts/vllm-study.sh vllm-out
#
# KILL=pid (the default) SIGKILLs replica-1's API-server pid, which leaves vLLM's EngineCore and
# Worker processes running as orphans (BENCHMARKS.md); the cleanup kills them by name.
# KILL=group starts each replica in a session of its own (setsid) and kills the whole group, as
# deleting a pod kills every process of its container; on the 2-core VM those runs had send skew
# in seconds from their first second, before any fault, for a reason not yet found (BENCHMARKS.md),
# so they measure nothing there.
#
# Needs `vllm-cpu.sh setup` done once (about 6 GB, 10 minutes). Not part of CI. Dev profile
# (FACTOR divides the timeline: 5 gives 12 s warm-up, 60 s baseline, 120 s recovery window,
# 12 s cooldown), so every number it produces is NOT PUBLISHABLE. LAMBDA_MAX is the per-replica
# capacity the rate is derived from (SPEC §1: 2 x 0.65 x LAMBDA_MAX in all); run
# `percentes calibrate` against one replica to measure it rather than assume it.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-vllm-out}"
vllm_sh="${VLLM_SH:-../shared/real-targets/vllm-cpu.sh}"
lambda_max="${LAMBDA_MAX:-2.0}"
factor="${FACTOR:-5}"
detection_s="${DETECTION_S:-5}"
base="${BASE_PORT:-8100}"
if [ -z "${BIN:-}" ]; then
    cargo build --release --locked
    BIN=target/release/percentes
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
pids=()
kill_mode="${KILL:-pid}"
cleanup() {
    # A replica's pid is its process group's id (setsid): the group takes its engine processes.
    for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
    [ -f "$out/replica-1.pid" ] && kill -- "-$(cat "$out/replica-1.pid")" 2>/dev/null || true
    [ -f "$out/replica-1.pid" ] && kill "$(cat "$out/replica-1.pid")" 2>/dev/null || true
    # A killed API server's engine processes outlive it (reparented to init).
    pkill -KILL -f 'VLLM::(EngineCore|Worker)' 2>/dev/null || true
}
trap cleanup EXIT

serve() { # name port: starts a replica, its pid in OUT/NAME.pid, its log in OUT/NAME.log
    if [ "$kill_mode" = group ]; then
        setsid "$vllm_sh" serve "$2" tiny >"$out/$1.log" 2>&1 &
    else
        "$vllm_sh" serve "$2" tiny >"$out/$1.log" 2>&1 &
    fi
    echo $! >"$out/$1.pid"
}
healthy() { curl -fsS -m 2 "http://127.0.0.1:$1/health" >/dev/null 2>&1; }
wait_healthy() {
    for _ in $(seq 1 240); do healthy "$1" && return 0; sleep 1; done
    echo "vLLM on port $1 did not become healthy; see $out/*.log" >&2
    exit 1
}

echo "== starting two vLLM replicas (60-90 s each on 2 cores)"
serve replica-0 $((base + 1)); pids+=("$(cat "$out/replica-0.pid")")
serve replica-1 $((base + 2))
wait_healthy $((base + 1)); wait_healthy $((base + 2))
victim_pid="$(cat "$out/replica-1.pid")"
if [ "$kill_mode" = group ]; then
    injector="injector = \"exec\"
fire_command = [\"kill\", \"-KILL\", \"--\", \"-$victim_pid\"]"
else
    injector="injector = \"kill-pid-file\"
pid_file = \"$out/replica-1.pid\""
fi
"$BIN" router --listen "127.0.0.1:$base" \
    --upstream "replica-0=127.0.0.1:$((base + 1))" --upstream "replica-1=127.0.0.1:$((base + 2))" \
    >"$out/router.log" 2>&1 &
pids+=($!)
sleep 1

cat >"$out/study.toml" <<EOF
schema_version = 1
profile = "dev"
[dev]
time_factor = $factor
[target]
kind = "self-hosted"
base_url = "http://127.0.0.1:$base"
model = "tiny"
replicas = ["replica-0", "replica-1"]
replica_addresses = { "replica-0" = "127.0.0.1:$((base + 1))", "replica-1" = "127.0.0.1:$((base + 2))" }
[schedule]
seed = 1
arrival = "poisson"
[calibration]
lambda_max_rps = $lambda_max
[fault]
variant = "clean-delete"
victim = "replica-1"
$injector
confirm_address = "127.0.0.1:$((base + 2))"
[[routes]]
label = "chat"
path = "/v1/chat/completions"
prompt_tokens = 64
EOF

# The orchestrator's part, as a cluster's would do it: notice the kill, take the endpoint out
# after the detection delay, restart the replica, put it back when it is healthy again.
(
    victim="$(cat "$out/replica-1.pid")"
    while kill -0 "$victim" 2>/dev/null; do sleep 0.2; done
    echo "$(date -u +%T.%N) replica-1 gone" >>"$out/orchestrator.log"
    sleep "$detection_s"
    curl -fsS -X POST "http://127.0.0.1:$base/admin/endpoints" \
        -d '{"name": "replica-1", "ready": false}' >>"$out/orchestrator.log" 2>&1 || true
    serve replica-1 $((base + 2))
    wait_healthy $((base + 2))
    curl -fsS -X POST "http://127.0.0.1:$base/admin/endpoints" \
        -d '{"name": "replica-1", "ready": true}' >>"$out/orchestrator.log" 2>&1 || true
    echo "$(date -u +%T.%N) replica-1 ready" >>"$out/orchestrator.log"
) &
pids+=($!)

echo "== recording (about $((1020 / factor)) s)"
set +e
"$BIN" record "$out/study.toml" -o "$out/run.pj" --force | tee "$out/record.txt"
set -e
"$BIN" verify "$out/run.pj" | tee "$out/verify.txt" || true
"$BIN" analyze "$out/run.pj" -o "$out/report" | tee "$out/analyze.txt" || true
echo "== done: $out/report"
