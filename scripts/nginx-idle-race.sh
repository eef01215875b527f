#!/usr/bin/env bash
# The idle-close race against a server nobody here wrote: Debian's nginx with
# `keepalive_timeout 1s`, answering the chat route with a short SSE body, recorded at 2 rps
# (Poisson) for 60 s (dev profile, time factor 7: 420 s of schedule / 7). Before issue 14's pool
# this lost about one request in ten as `premature-close` (8 of 81 in the issue); the pool must
# now show none. Prints the record summary (classes, what the pool retired) and the classes.
#
#   scripts/nginx-idle-race.sh [OUT]        (BIN=target/debug/percentes to skip the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-nginx-race-out}"
mkdir -p "$out/logs"
out="$(cd "$out" && pwd)"
if [ -z "${BIN:-}" ]; then
    cargo build --release --locked
    BIN=target/release/percentes
fi
port="${PORT:-8190}"
sse='data: {"model":"mock","choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"model":"mock","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}\n\ndata: [DONE]\n\n'
cat >"$out/nginx.conf" <<EOF
worker_processes 1;
error_log $out/logs/error.log;
pid $out/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $out/body; proxy_temp_path $out/proxy; fastcgi_temp_path $out/fastcgi;
  uwsgi_temp_path $out/uwsgi; scgi_temp_path $out/scgi;
  keepalive_timeout 1s;
  server {
    listen 127.0.0.1:$port;
    location = /v1/models { default_type application/json; return 200 '{"object":"list","data":[{"id":"mock"}]}'; }
    location / { default_type text/event-stream; return 200 '$sse'; }
  }
}
EOF
nginx -p "$out" -c "$out/nginx.conf" -g 'daemon off;' &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 1
cat >"$out/run.toml" <<EOF
schema_version = 1
profile = "dev"
[dev]
time_factor = 7
[target]
kind = "mock"
base_url = "http://127.0.0.1:$port"
model = "mock"
replicas = ["nginx"]
[schedule]
seed = 11
arrival = "poisson"
rate_rps = 2.0
[fault]
variant = "none"
[[routes]]
label = "chat"
path = "/v1/chat/completions"
EOF
"$BIN" record "$out/run.toml" -o "$out/run.pj" --force --quiet | tee "$out/record.txt"
"$BIN" inspect "$out/run.pj" --records --kind request | python3 -c '
import json, sys, collections
c = collections.Counter(json.loads(l)["class_name"] for l in sys.stdin)
print("classes:", dict(c))'
