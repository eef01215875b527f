#!/usr/bin/env bash
# Where a recording's latest sends lost their time (ARCHITECTURE.md "Real servers", BENCHMARKS.md
# "The container stall, found"): runs one recording with the kernel's scheduler switches and wakes
# traced on every CPU, on CLOCK_MONOTONIC, the clock the journal's epoch is stated on, then, for
# each of the N latest sends (dispatch minus intended time), says what the worker that sent it was
# doing from the intended time to the send:
#   asleep in the kernel   the worker left its CPU in uninterruptible sleep (state D), with the
#                          kernel's stack where it waited: a page fault, the descriptor table's
#                          growth (expand_files, synchronize_rcu), a lock;
#   waiting for its CPU    the worker was runnable (woken, or preempted) while other threads ran
#                          on its CPU: each named with its pid, priority and time there;
#   busy                   the worker ran the whole span: its own work (a burst of responses, a
#                          connect) made the send late;
# then its switches over the span. A request that needed a new connection says so (its connect is
# in its send's time from v0.3 on).
#
# The tracing costs the recorder CPU (every switch of every thread is written): what it shows is
# where time went in the traced run, whose lateness is its own; at tens of thousands of switches
# a second it perturbs the run, so trace a run of the rate and length the question needs.
#
# Needs: perf (linux-perf) with tracepoints readable (root, or kernel.perf_event_paranoid at -1),
# python3. BIN is the recorder; RECORD_ARGS are `percentes record`'s own (a configuration file or a
# quick run's flags), without -o: the journal goes to DIR/run.pj, the trace to DIR/sched.data.
# Usage: scripts/why-late.sh BIN DIR N RECORD_ARGS...
#   e.g. scripts/why-late.sh target/release/percentes /var/tmp/late 5 run.toml --cpus 1
set -euo pipefail
bin=${1:?the recorder binary}
dir=${2:?a folder for the journal and the trace}
count=${3:?how many of the latest sends to explain}
shift 3
[ -x "$bin" ] || { echo "no recorder binary at $bin" >&2; exit 1; }
command -v perf > /dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$dir"
# Stacks only where the worker sleeps uninterruptibly would need a filter per event; all switches
# carry their stack here (-g), which the report reads only for the D-state ones.
set +e
perf record -q -a -g -k CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_waking \
    -o "$dir/sched.data" -- "$bin" record "$@" -o "$dir/run.pj" --force > "$dir/record.out" 2>&1
code=$?
set -e
echo "recording exited $code ($dir/record.out); its last line: $(tail -1 "$dir/record.out")"
[ -s "$dir/run.pj" ] || { echo "no journal was written" >&2; exit 1; }
epoch=$("$bin" inspect "$dir/run.pj" | sed -n 's/.*epoch at monotonic \([0-9]*\) ns.*/\1/p')
[ -n "$epoch" ] || { echo "the journal's header states no monotonic epoch" >&2; exit 1; }
"$bin" inspect "$dir/run.pj" --records --kind request > "$dir/requests.jsonl"
perf script -i "$dir/sched.data" -F comm,tid,cpu,time,event,trace,ip,sym 2> /dev/null > "$dir/sched.txt"
python3 - "$epoch" "$count" "$dir" <<'PY'
import json
import re
import sys

epoch, count, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

# Requests sent, latest first.
sent = []
for line in open(f"{folder}/requests.jsonl"):
    r = json.loads(line)
    if r["dispatched_ns"] is not None:
        sent.append(r)
sent.sort(key=lambda r: r["dispatched_ns"] - r["intended_ns"], reverse=True)

# perf script: a header line per event, then its stack lines (for -g), blank line between.
head = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(sched_switch|sched_waking):\s+(.*)$")
field = re.compile(r"(\w+)=(\S+)")
events = []
for block in open(f"{folder}/sched.txt").read().split("\n\n"):
    lines = block.strip("\n").split("\n")
    m = head.match(lines[0]) if lines else None
    if not m:
        continue
    comm, tid, cpu, t, kind, rest = m.groups()
    fields = dict(field.findall(rest))
    stack = [l.split(None, 1)[1].split("+")[0] for l in lines[1:] if len(l.split(None, 1)) == 2]
    events.append((int(round(float(t) * 1e9)), int(cpu), kind, fields, stack))
events.sort(key=lambda e: e[0])

# The workers' thread ids, by name.
workers = {}
for _, _, kind, f, _ in events:
    for side in ("prev", "next"):
        name, pid = f.get(f"{side}_comm"), f.get(f"{side}_pid")
        if name and name.startswith("worker-") and pid:
            workers[int(pid)] = name
if not workers:
    sys.exit("no worker thread in the trace (was the recording traced?)")

def ms(ns):
    return f"{ns / 1e6:.3f} ms"

def explain(r):
    start, end = epoch + r["intended_ns"], epoch + r["dispatched_ns"]
    late = end - start
    new = "a new connection" if r["connect_start_ns"] is not None else "a pooled connection"
    print(f"\nrequest {r['index']}: sent {ms(late)} after its intended time, on {new}")
    # Which worker: the one that ran at the send (switched in last before it).
    worker, cpu, state = None, None, None
    for t, c, kind, f, stack in events:
        if t > end:
            break
        if kind == "sched_switch" and int(f["next_pid"]) in workers:
            worker, cpu = int(f["next_pid"]), c
    if worker is None:
        print("  no worker ran before the send in the trace")
        return
    # Its state at the intended time: the last switch of it before then.
    last_out, last_in, stack_out = None, None, []
    for t, c, kind, f, stack in events:
        if t > start:
            break
        if kind != "sched_switch":
            continue
        if int(f["prev_pid"]) == worker:
            last_out, state, stack_out = t, f["prev_state"], stack
        if int(f["next_pid"]) == worker:
            last_in = t
    span = [e for e in events if start <= e[0] <= end]
    on_cpu = last_in is not None and (last_out is None or last_in > last_out)
    own = [e for e in span if e[2] == "sched_switch" and worker in (int(e[3]["prev_pid"]), int(e[3]["next_pid"]))]
    if on_cpu and not own:
        print(f"  {workers[worker]} ran on CPU {cpu} the whole span: busy with its own work")
        return
    if not on_cpu and state and state.startswith("D"):
        frames = [s for s in stack_out if not s.startswith(("__schedule", "schedule", "[unknown]"))][:8]
        print(f"  {workers[worker]} was asleep in the kernel (state D) from {ms(start - last_out)} before the intended time: " + " <- ".join(frames))
    # Who else had its CPU over the span, and for how long.
    others, running, since = {}, None, start
    for t, c, kind, f, stack in events:
        if t > end:
            break
        if c != cpu or kind != "sched_switch":
            continue
        if t >= start:
            if running is not None and int(running[1]) != worker and running[1] != "0":
                key = f"{running[0]} (pid {running[1]}, priority {running[2]})"
                others[key] = others.get(key, 0) + t - max(since, start)
        running, since = (f["next_comm"], f["next_pid"], f["next_prio"]), t
    woken = [e[0] for e in span if e[2] == "sched_waking" and int(e[3]["pid"]) == worker]
    if woken:
        print(f"  woken {ms(woken[0] - start)} after the intended time")
    if others:
        print(f"  waiting for CPU {cpu} while others ran there: " + "; ".join(f"{k} {ms(v)}" for k, v in sorted(others.items(), key=lambda kv: -kv[1])))
    for t, c, kind, f, stack in own:
        if int(f["prev_pid"]) == worker:
            print(f"  +{ms(t - start)}: {workers[worker]} leaves CPU {c} ({f['prev_state']}) for {f['next_comm']} (pid {f['next_pid']})")
        else:
            print(f"  +{ms(t - start)}: {workers[worker]} runs on CPU {c}, after {f['prev_comm']} (pid {f['prev_pid']})")

print(f"{len(sent)} requests sent; the {min(count, len(sent))} latest:")
for r in sent[:count]:
    explain(r)
PY
