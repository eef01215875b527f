#!/usr/bin/env bash
# From the wire (BENCHMARKS.md, issue 20): percentes, wrk2 and oha against the same nginx, each
# request's send time read from a loopback packet capture, at 1,000, 10,000 and 20,000 rps on a
# constant-rate schedule; REPEATS interleaved rounds of SECONDS per tool and rate. nginx (and
# tcpdump) on core 0, the generator on core 1. CPU per request is the generator's user + system
# time (/usr/bin/time) over the requests the capture saw; the capture's own copy of each packet
# is charged to the sender, equally for every tool.
#
# Needs: nginx, tcpdump (Debian), oha (`cargo install oha`), wrk2 built from source
# (github.com/giltene/wrk2, `make`; its binary is `wrk`, given as WRK2=PATH).
# Usage: WRK2=/path/to/wrk2/wrk scripts/bench-wire.sh [REPEATS] [SECONDS] [RATES]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fixed-nginx.sh
repeats=${1:-3}
seconds=${2:-20}
rates=${3:-"1000 10000 20000"}
wrk2=${WRK2:?set WRK2 to the wrk2 binary (built from github.com/giltene/wrk2)}
command -v oha >/dev/null || { echo "oha is not installed (cargo install oha)"; exit 1; }
command -v tcpdump >/dev/null || { echo "tcpdump is not installed (apt-get install tcpdump)"; exit 1; }
cargo build --release --locked -q
bin=$PWD/target/release/percentes
work=$(mktemp -d /var/tmp/bench-wire.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT
port=18190

start_fixed_nginx "$work" $port
body='{"prompt":"a","max_tokens":256,"stream":false,"ignore_eos":true}'
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
LUA

# The dev profile's phases (warm-up 60, baseline 300, cooldown 60 s) over a time factor that
# makes them SECONDS in all; deterministic arrivals: one grid, k / rate from the epoch.
factor=$(( 420 / seconds ))
config() { # RATE
  fixed_run_config "$port" "$1" "$factor"
}

capture_start() { # FILE
  taskset -c 0 tcpdump -i lo -s 320 -B 262144 --time-stamp-precision=nano -w "$1" \
    "tcp dst port $port and (tcp[tcpflags] & tcp-push != 0)" 2>/dev/null &
  echo $! > "$work/tcpdump.pid"
  sleep 1
}
capture_stop() {
  sleep 0.5
  kill -INT "$(cat "$work/tcpdump.pid")"
  wait "$(cat "$work/tcpdump.pid")" 2>/dev/null || true
}
report() { # TOOL RATE ROUND PCAP CPUFILE [journal args]
  local tool=$1 rate=$2 round=$3 pcap=$4 cpu
  cpu=$(awk '{print $1 + $2}' "$5")
  shift 5
  python3 scripts/wire_lateness.py "$pcap" "$port" "$rate" "$@" |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
n = r['requests_on_the_wire']
g = r.get('grid') or {}
j = r.get('journal')
cpu = float('$cpu')
line = f\"| $tool | $rate | $round | {n} | {r.get('achieved_rps') or 0:.1f} | {g.get('p50_us', 0):.0f} | {g.get('p99_us', 0):.0f} | {g.get('p999_us', 0):.0f} | {g.get('max_us', 0):.0f} |\"
if j:
    line += f\" {j['p50_us']:.0f} / {j['p99_us']:.0f} / {j['p999_us']:.0f} / {j['max_us']:.0f}, early {j['early']}, unmatched {r['journal_unmatched']} |\"
else:
    line += ' - |'
line += f' {cpu:.2f} s, {cpu / max(n, 1) * 1e6:.1f} us |'
print(line)
"
  rm -f "$pcap"
}

echo "== $(date -u +%FT%TZ), $(nproc) cores, $(uname -r); $repeats rounds of $seconds s per tool and rate"
echo "| tool | rate | round | requests | achieved rps | grid p50 us | p99 | p99.9 | max | own intended p50 / p99 / p99.9 / max us | CPU, per request |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$repeats"); do
  for rate in $rates; do
    # percentes: one worker, whole process on core 1, canary on (the default).
    config "$rate" > "$work/p.toml"
    capture_start "$work/p.pcap"
    /usr/bin/time -f "%U %S" -o "$work/p.cpu" taskset -c 1 "$bin" record "$work/p.toml" \
      -o "$work/p.pj" --force --quiet > /dev/null 2>&1 || true
    capture_stop
    "$bin" inspect "$work/p.pj" --records --kind request > "$work/p.jsonl"
    epoch=$("$bin" inspect "$work/p.pj" | python3 -c "
import sys, re, calendar
m = re.search(r'= (\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d+)Z', sys.stdin.read())
y, mo, d, h, mi, s, frac = m.groups()
print(calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s))) * 10**9 + int(frac.ljust(9, '0')))
")
    report percentes "$rate" "$round" "$work/p.pcap" "$work/p.cpu" \
      --journal-records "$work/p.jsonl" --realtime-epoch-ns "$epoch"
    # wrk2: constant throughput, latency corrected; one thread, 64 connections.
    capture_start "$work/w.pcap"
    /usr/bin/time -f "%U %S" -o "$work/w.cpu" taskset -c 1 "$wrk2" -t1 -c64 -d"${seconds}s" \
      -R"$rate" -s "$work/post.lua" "http://127.0.0.1:$port/v1/completions" > "$work/w.txt" 2>&1 || true
    capture_stop
    report wrk2 "$rate" "$round" "$work/w.pcap" "$work/w.cpu"
    # oha: -q (queries per second), latency correction on, 64 connections.
    capture_start "$work/o.pcap"
    /usr/bin/time -f "%U %S" -o "$work/o.cpu" taskset -c 1 oha -q "$rate" -z "${seconds}s" -c 64 \
      --latency-correction --no-tui -m POST -d "$body" -T application/json \
      "http://127.0.0.1:$port/v1/completions" > "$work/o.txt" 2>&1 || true
    capture_stop
    report oha "$rate" "$round" "$work/o.pcap" "$work/o.cpu"
  done
done
