#!/usr/bin/env bash
# Recorder benchmark (BENCHMARKS.md): send skew, achieved vs requested rate and CPU per request
# at 20 rps SSE (256 tokens), 1,000 rps and 10,000 rps plain HTTP/1.1, against the mock and
# against nginx on loopback; beside it oha -q and wrk on the same nginx; and the machine's
# wake-up floor measured in the same run. Needs nginx (Debian), wrk (Debian), oha (cargo install
# oha). Each load runs 10 s. Usage: scripts/bench-recorder.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fixed-nginx.sh
cargo build --release --locked -q
cargo build --release --locked -q -p percentes-recorder --bench floor
bin=$PWD/target/release/percentes
floor=$(ls -t target/release/deps/floor-* | grep -v '\.d$' | head -1)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT

echo "== the machine's wake-up floor (io_uring absolute timeouts, nothing else running), pinned like the recorder"
taskset -c 1 "$floor" 2000 1000
taskset -c 1 "$floor" poisson 1000 10
taskset -c 1 "$floor" poisson 10000 10

start_fixed_nginx "$work" 18180

cat > "$work/sse-mock.toml" <<'TOML'
[timing]
ttft = { kind = "constant", ms = 50.0 }
token_gap = { kind = "constant", ms = 2.0 }
[capacity]
max_num_seqs = 1000
slowdown_per_running = 0.0
TOML
cat > "$work/plain-mock.toml" <<'TOML'
[timing]
ttft = { kind = "constant", ms = 0.0 }
token_gap = { kind = "constant", ms = 0.0 }
[capacity]
max_num_seqs = 100000
slowdown_per_running = 0.0
TOML
taskset -c 0 "$bin" mock --threads 1 --config "$work/sse-mock.toml" --listen 127.0.0.1:18181 2>/dev/null &
taskset -c 0 "$bin" mock --threads 1 --config "$work/plain-mock.toml" --listen 127.0.0.1:18182 2>/dev/null &
sleep 0.5

config() { # ADDR RATE STREAM PATH
  cat <<TOML
schema_version = 1
profile = "dev"
[dev]
time_factor = 42
[target]
kind = "mock"
base_url = "http://$1"
model = "mock"
replicas = ["replica-0"]
stream = $3
# nginx serves no /v1/models; the pre-flight (SPEC §2) would refuse it.
preflight = false
[schedule]
seed = 1
arrival = "poisson"
rate_rps = $2
[fault]
variant = "none"
[[routes]]
label = "r"
path = "$4"
TOML
}

record() { # NAME ADDR RATE STREAM PATH
  config "$2" "$3" "$4" "$5" > "$work/$1.toml"
  /usr/bin/time -f "%U %S" -o "$work/$1.cpu" taskset -c 1 "$bin" record "$work/$1.toml" -o "$work/$1.pj" --force --quiet > /dev/null 2>&1 || true
  stats=$("$bin" inspect "$work/$1.pj" --records --kind request | python3 scripts/journal_stats.py)
  cpu=$(awk '{print $1 + $2}' "$work/$1.cpu")
  n=$(echo "$stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
  echo "| recorder -> $1 | $3 | $stats | cpu ${cpu} s, $(python3 -c "print(round($cpu / max($n, 1) * 1e6, 1))") us/request |"
}

echo "== recorder (10 s each, one worker on core 1; servers on core 0)"
record mock-sse-20 127.0.0.1:18181 20 true /v1/chat/completions
record nginx-sse-20 127.0.0.1:18180 20 true /v1/chat/completions
record mock-plain-1000 127.0.0.1:18182 1000 false /v1/completions
record nginx-plain-1000 127.0.0.1:18180 1000 false /v1/completions
record mock-plain-10000 127.0.0.1:18182 10000 false /v1/completions
record nginx-plain-10000 127.0.0.1:18180 10000 false /v1/completions

echo "== oha -q (open loop at a fixed rate; latency correction on) and wrk (closed loop) on the same nginx"
body='{"prompt":"a","max_tokens":256,"stream":false,"ignore_eos":true}'
for rate in 1000 10000; do
  /usr/bin/time -f "%U %S" -o "$work/oha.cpu" taskset -c 1 oha -q $rate -z 10s -c 64 --latency-correction --no-tui -m POST -d "$body" -T application/json http://127.0.0.1:18180/v1/completions > "$work/oha.txt" 2>&1 || true
  done_requests=$(grep -E "Success rate|Requests/sec" "$work/oha.txt" | tr -s ' ' | tr '\n' ' ')
  cpu=$(awk '{print $1 + $2}' "$work/oha.cpu")
  echo "| oha -q $rate | $done_requests | cpu ${cpu} s, $(python3 -c "print(round($cpu / ($rate * 10) * 1e6, 1))") us/request |"
done
/usr/bin/time -f "%U %S" -o "$work/wrk.cpu" taskset -c 1 wrk -t1 -c64 -d10s http://127.0.0.1:18180/v1/completions > "$work/wrk.txt" 2>&1
rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")
cpu=$(awk '{print $1 + $2}' "$work/wrk.cpu")
echo "| wrk (closed loop, max rate) | $rps rps | cpu ${cpu} s, $(python3 -c "print(round($cpu / ($rps * 10) * 1e6, 2))") us/request |"
