#!/usr/bin/env bash
# Mock benchmark (BENCHMARKS.md): plain requests per second with the mock pinned to one core, and
# concurrent SSE streams held. The load runs on the other core. Needs wrk (Debian: apt-get
# install wrk). Usage: scripts/bench-mock.sh [STREAMS]
set -euo pipefail
cd "$(dirname "$0")/.."
streams=${1:-5000}
cargo build --release --locked -q
cargo build --release --locked -q -p percentes-scenarios --bench streams 2>/dev/null || true
bin=target/release/percentes
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

cpu_seconds() { awk '{ print ($14 + $15) / 100 }' "/proc/$1/stat"; }

# 1. Plain requests: non-streaming, one token, no modelled delay, so the server path is all that is timed.
cat > "$work/plain.toml" <<'TOML'
[timing]
ttft = { kind = "constant", ms = 0.0 }
token_gap = { kind = "constant", ms = 0.0 }
min_output_tokens = 1
[capacity]
max_num_seqs = 100000
slowdown_per_running = 0.0
TOML
cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"prompt":"a","max_tokens":1,"stream":false,"ignore_eos":true}'
wrk.headers["Content-Type"] = "application/json"
LUA
taskset -c 0 "$bin" mock --threads 1 --config "$work/plain.toml" --listen 127.0.0.1:18080 2>/dev/null &
mock_pid=$!
sleep 1
before=$(cpu_seconds $mock_pid)
echo "== plain: POST /v1/completions, max_tokens 1, mock on core 0 (1 thread), wrk on core 1"
taskset -c 1 wrk -t1 -c64 -d10s -s "$work/post.lua" http://127.0.0.1:18080/v1/completions
echo "mock CPU over the run: $(echo "$(cpu_seconds $mock_pid) - $before" | bc) s of 10 s"
echo "== plain: GET /health"
taskset -c 1 wrk -t1 -c64 -d5s http://127.0.0.1:18080/health | grep -E "Requests/sec|Latency"
kill $mock_pid; wait $mock_pid 2>/dev/null || true

# 2. Streams held: each stream 100 tokens 100 ms apart (10 s), all admitted at once.
cat > "$work/streams.toml" <<'TOML'
[timing]
ttft = { kind = "constant", ms = 100.0 }
token_gap = { kind = "constant", ms = 100.0 }
min_output_tokens = 1
[capacity]
max_num_seqs = 100000
slowdown_per_running = 0.0
TOML
taskset -c 0 "$bin" mock --threads 1 --config "$work/streams.toml" --listen 127.0.0.1:18081 2>/dev/null &
mock_pid=$!
sleep 1
before=$(cpu_seconds $mock_pid)
echo "== streams: $streams concurrent SSE streams, 100 tokens at 100 ms, mock on core 0 (1 thread)"
client=$(ls -t target/release/deps/streams-* | grep -v '\.d$' | head -1)
taskset -c 1 "$client" 127.0.0.1:18081 "$streams" 100
echo "mock CPU over the run: $(echo "$(cpu_seconds $mock_pid) - $before" | bc) s"
