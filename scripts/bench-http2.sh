#!/usr/bin/env bash
# HTTP/2 benchmark (BENCHMARKS.md, "HTTP/2", issue 17): send skew and CPU per request of the
# recorder at 1,000 and 10,000 rps against one nginx, over HTTP/1.1 and over HTTP/2 (cleartext,
# prior knowledge, so TLS does not blur the comparison; and over TLS with ALPN h2 at 1,000), beside
# oha -q --http2 on the same nginx, ROUNDS times interleaved in one run. nginx on core 0, each
# client alone on core 1. Needs nginx (Debian), oha (cargo install oha). Each load runs SECONDS.
# Usage: scripts/bench-http2.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-10}
cargo build --release --locked -q
bin=$PWD/target/release/percentes
oha=$(command -v oha || echo /var/tmp/oha/bin/oha)
work=$(mktemp -d)
trap '[ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  http2_max_concurrent_streams 1000;
  server {
    listen 127.0.0.1:18180;
    listen 127.0.0.1:18183 http2;
    listen 127.0.0.1:18184 ssl http2;
    ssl_certificate $work/cert.pem;
    ssl_certificate_key $work/key.pem;
    location /v1/completions {
      default_type application/json;
      return 200 '{"model":"mock","choices":[{"index":0,"text":"x"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}';
    }
  }
}
CONF
taskset -c 0 nginx -c "$work/nginx.conf" -e "$work/error.log"
sleep 0.5

config() { # URL RATE HTTP
  cat <<TOML
schema_version = 1
profile = "dev"
[dev]
warmup_s = 1
measure_s = $seconds
cooldown_s = 0
[target]
kind = "mock"
base_url = "$1"
model = "mock"
replicas = ["replica-0"]
stream = false
preflight = false
http = "$3"
[target.tls]
ca_file = "$work/cert.pem"
[schedule]
seed = 1
arrival = "poisson"
rate_rps = $2
[fault]
variant = "none"
[[routes]]
label = "r"
path = "/v1/completions"
TOML
}

record() { # NAME URL RATE HTTP
  config "$2" "$3" "$4" > "$work/$1.toml"
  /usr/bin/time -f "%U %S" -o "$work/$1.cpu" taskset -c 1 "$bin" record "$work/$1.toml" -o "$work/$1.pj" --force --quiet > /dev/null 2>&1 || true
  stats=$("$bin" inspect "$work/$1.pj" --records --kind request | python3 scripts/journal_stats.py)
  cpu=$(awk '{print $1 + $2}' "$work/$1.cpu")
  n=$(echo "$stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
  echo "| percentes $1 | $3 | $stats | cpu ${cpu} s, $(python3 -c "print(round($cpu / max($n, 1) * 1e6, 1))") us/request |"
}

oha_run() { # NAME RATE URL FLAGS...
  local name=$1 rate=$2 url=$3
  shift 3
  /usr/bin/time -f "%U %S" -o "$work/oha.cpu" taskset -c 1 "$oha" -q "$rate" -z "${seconds}s" -c 64 --latency-correction --no-tui "$@" \
    -m POST -d '{"prompt":"a","max_tokens":256,"stream":false}' -T application/json "$url" > "$work/oha.txt" 2>&1 || true
  local said cpu
  said=$(grep -E "Success rate|Requests/sec" "$work/oha.txt" | tr -s ' ' | tr '\n' ' ')
  cpu=$(awk '{print $1 + $2}' "$work/oha.cpu")
  echo "| oha $name | $rate | $said | cpu ${cpu} s, $(python3 -c "print(round($cpu / ($rate * $seconds) * 1e6, 1))") us/request |"
}

echo "| client | rps | result | CPU |"
echo "|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  echo "| round $round | | | |"
  for rate in 1000 10000; do
    record "http1.1-$rate" http://127.0.0.1:18180 $rate 1.1
    record "h2c-$rate" http://127.0.0.1:18183 $rate 2
    oha_run "--http2 (h2c)" $rate http://127.0.0.1:18183/v1/completions --http2
    oha_run "http/1.1" $rate http://127.0.0.1:18180/v1/completions
  done
  record "h2-tls-1000" https://127.0.0.1:18184 1000 2
done
