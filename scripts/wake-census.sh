#!/usr/bin/env bash
# Why the recorder's worker wakes (BENCHMARKS.md, "What wakes the worker", issue 57 item 1): the
# recorder against the fixed nginx (scripts/fixed-nginx.sh: nginx on core 0, the recorder on core
# 1, deterministic arrivals, plain responses) at each RATE for about 10 s, with the kernel's
# scheduler tracepoints recorded on every CPU while it runs. Each time the worker thread is woken,
# the waker's kernel stack says why:
#   response  a socket of the worker became readable (the target's answer arrived: TCP receive
#             under the io_uring poll that a pending read arms);
#   timeout   an io_uring timeout operation fired: the pacer's absolute sleep to the next
#             request's intended time, or the 1 ms stall ticker's (SPEC §2, G2.4), which sleeps
#             the same way (the kernel's stack does not tell the two apart);
#   runtime   the ring wait's own timeout: compio's timers (the record batch's flush, the spare
#             keeper, a request's deadline);
#   other     anything else (a futex, a signal).
# Printed per rate: requests, the worker's sleeps and wakes a request by cause, then, from a second
# run without the tracing, the process's CPU a request (/usr/bin/time user + system over the
# requests, as ab-recorder.sh) and its send skew.
#
# Needs: nginx (Debian), perf (linux-perf) with tracepoints readable (root, or
# kernel.perf_event_paranoid at -1). BIN defaults to the release build.
# Usage: scripts/wake-census.sh [BIN] [RATES]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fixed-nginx.sh
bin=${1:-$PWD/target/release/percentes}
rates=${2:-"1000 10000"}
[ -x "$bin" ] || { echo "no recorder binary at $bin (cargo build --release --locked)"; exit 1; }
command -v perf > /dev/null || { echo "perf is not installed (apt-get install linux-perf)"; exit 1; }
work=$(mktemp -d /var/tmp/wake-census.XXXXXX)
trap '[ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT
port=18193
start_fixed_nginx "$work" $port
# A run that failed its own client gates (exit 2: a busy host) still counts its wakes; say so.
gates() {
  grep -q '^seal:' "$work/record.out" || { cat "$work/record.out"; exit 1; }
  echo "  ($1: the recorder exited non-zero; its last line: $(tail -1 "$work/record.out"))"
}
for rate in $rates; do
  fixed_run_config $port "$rate" 42 > "$work/run.toml"
  # Filtered in the kernel to the worker's own events, so that the tracing (stacks on every
  # CPU) slows the run as little as it can: unfiltered, the worker slept 0.49 times a request at
  # 10,000 rps against 1.17 untraced (perf stat), a busier worker reaping more in each wake.
  perf record -q -a -g -o "$work/perf.data" \
    -e sched:sched_waking --filter 'comm == "worker-0"' \
    -e sched:sched_switch --filter 'prev_comm == "worker-0" && prev_state == 1' -- \
    taskset -c 1 "$bin" record "$work/run.toml" -o "$work/run.pj" --force --quiet \
    > "$work/record.out" 2>&1 || gates "$rate, traced"
  requests=$("$bin" inspect "$work/run.pj" --records --kind request | wc -l)
  perf script -i "$work/perf.data" -F comm,tid,event,trace,ip,sym 2> /dev/null |
    RATE=$rate REQUESTS=$requests python3 -c '
import collections, os, sys
rate, requests = int(os.environ["RATE"]), int(os.environ["REQUESTS"])
wakes, sleeps, head, frames = collections.Counter(), 0, None, []

def close():
    global sleeps
    if head is None:
        return
    if "sched_switch" in head and "prev_comm=worker-0 " in head:
        sleeps += 1
    elif "sched_waking" in head and "comm=worker-0 " in head:
        stack = " ".join(frames)
        if "tcp_rcv_established" in stack or "tcp_data_queue" in stack:
            wakes["response"] += 1
        elif "io_timeout_fn" in stack:
            wakes["timeout"] += 1
        elif "io_cqring_timer_wakeup" in stack:
            wakes["runtime"] += 1
        else:
            wakes["other"] += 1

for line in sys.stdin:
    if not line.strip():
        close()
        head, frames = None, []
    elif line[0] in " \t":
        frames.append(line.split()[1] if len(line.split()) > 1 else "")
    else:
        close()
        head, frames = line, []
close()
n = max(requests, 1)
causes = ", ".join(f"{k} {wakes[k] / n:.2f}" for k in ("response", "timeout", "runtime", "other"))
print(f"{rate} rps: {requests} requests; the worker slept {sleeps / n:.2f} times a request; "
      f"woken a request: {causes} (all {sum(wakes.values()) / n:.2f})")
'
  # The same run untraced, for its CPU (the tracing on every CPU would be charged to it). The
  # times are the file's last line: a non-zero exit puts a line of its own before them.
  /usr/bin/time -f "%U %S" -o "$work/cpu" taskset -c 1 "$bin" record "$work/run.toml" \
    -o "$work/run.pj" --force --quiet > "$work/record.out" 2>&1 || gates "$rate, untraced"
  "$bin" inspect "$work/run.pj" --records --kind request | CPU="$(tail -1 "$work/cpu")" python3 -c '
import json, os, sys
skew, n = [], 0
for line in sys.stdin:
    r = json.loads(line)
    n += 1
    if r["dispatched_ns"] is not None:
        skew.append(r["dispatched_ns"] - r["intended_ns"])
skew.sort()
q = lambda p: skew[min(len(skew) - 1, int(p * len(skew)))] / 1e3
cpu = sum(float(x) for x in os.environ["CPU"].split())
print(f"  untraced: {n} requests, CPU {cpu / max(n, 1) * 1e6:.1f} us a request, "
      f"send skew p50 {q(0.5):.0f} us, p99 {q(0.99):.0f} us")
'
done
