# Sourced by the recorder benchmarks (bench-recorder.sh, bench-wire.sh, ab-recorder.sh): nginx
# from Debian giving fixed answers on loopback, pinned to core 0, one worker, no access log, one
# connection kept for any number of requests. /v1/completions answers plain JSON, and
# /v1/chat/completions an SSE stream as one body. The caller's EXIT trap stops it through
# WORK/nginx.pid.
# Usage: start_fixed_nginx WORK PORT
start_fixed_nginx() {
  local work=$1 port=$2
  cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  server {
    listen 127.0.0.1:$port;
    location /v1/chat/completions {
      default_type text/event-stream;
      return 200 'data: {"model":"mock","choices":[{"index":0,"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n';
    }
    location /v1/completions {
      default_type application/json;
      return 200 '{"model":"mock","choices":[{"index":0,"text":"x"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}';
    }
  }
}
CONF
  taskset -c 0 nginx -c "$work/nginx.conf" -e "$work/error.log"
  sleep 0.5
}

# A dev-profile run configuration against the fixed nginx on PORT: one route (plain JSON
# completions), deterministic arrivals at RATE, no fault, no pre-flight, the phases divided by
# FACTOR. Usage: fixed_run_config PORT RATE FACTOR
fixed_run_config() {
  cat <<TOML
schema_version = 1
profile = "dev"
[dev]
time_factor = $3
[target]
kind = "mock"
base_url = "http://127.0.0.1:$1"
model = "mock"
replicas = ["replica-0"]
stream = false
preflight = false
[schedule]
seed = 1
arrival = "deterministic"
rate_rps = $2
[fault]
variant = "none"
[[routes]]
label = "r"
path = "/v1/completions"
TOML
}
