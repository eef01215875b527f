#!/usr/bin/env python3
"""One row per run of the proxy-failover campaign (BENCHMARKS.md, the study's README).

Usage: summarize.py RUN_DIR... (each a `percentes scenario run` output folder holding run.pj
and report/report.json). Reads the report and the journal's timeline, request and scrape
records (through `percentes inspect`, PERCENTES_BIN or `percentes` on PATH); prints a Markdown
table: validity and the client gate, the failover's steps (kill, restart, both replicas UP, s
from the epoch), what the requests in flight through the proxy at the kill and those sent while
its port was closed became (by class, and when they ended), the first request served after the
kill (from the kill and from the restart), and what each replica's own gauge said: vLLM's
running requests at its last scrape before the kill and at its first one a second after it.
"""
import collections
import json
import os
import subprocess
import sys

BIN = os.environ.get("PERCENTES_BIN", "percentes")


def records(run, kind):
    out = subprocess.run([BIN, "inspect", os.path.join(run, "run.pj"), "--records", "--kind", kind],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def running(run, killed):
    """Each replica's vllm:num_requests_running just before the kill and a second after it."""
    ids, values, before, after = {}, collections.defaultdict(dict), {}, {}
    for r in records(run, "scrape"):
        source = r["source"]
        for d in r.get("defined", []):
            if d["name"] == "vllm:num_requests_running":
                ids[source] = d["id"]
        for s in r.get("samples", []):
            values[source][s["id"]] = s["value"]
        if source not in ids or not r["received_ns"]:
            continue
        value = values[source].get(ids[source])
        if r["received_ns"] < killed:
            before[source] = value
        elif r["received_ns"] > killed + 1e9 and source not in after:
            after[source] = value
    return ", ".join(f"{s} {before.get(s, '?'):.0f} -> {after.get(s, '?'):.0f}"
                     for s in sorted(ids))


def classes(rows):
    count = collections.Counter(r["class_name"] for r in rows)
    return ", ".join(f"{n} {c}" for c, n in count.most_common()) or "none"


def row(run):
    report = json.load(open(os.path.join(run, "report", "report.json")))
    gates = {g["gate"]: g for g in report["validity"]["gates"]}
    gate = lambda prefix: next((g for name, g in gates.items() if name.startswith(prefix)), {})
    timeline = [e for e in records(run, "event") if e.get("kind_name") == "timeline"]
    at = lambda words: next((e["at_ns"] for e in timeline if words in e["detail"]), None)
    killed, restarted, up = at("killed with SIGKILL"), at("HAProxy started again"), at("replicas UP")
    if killed is None or restarted is None:
        return f"| {os.path.basename(run.rstrip('/'))} | no failover in the timeline |"
    requests = records(run, "request")
    through = [r for r in requests if r.get("request_written_ns") and r["request_written_ns"] < killed < r["terminal_ns"]]
    down = [r for r in requests if r.get("dispatched_ns") and killed < r["dispatched_ns"] < restarted]
    last_end = max((r["terminal_ns"] for r in through), default=killed)
    served = min((r["dispatched_ns"] for r in requests
                  if r.get("dispatched_ns") and r["dispatched_ns"] > killed and r["outcome_name"] == "completed"),
                 default=None)
    first = (f"{(served - killed) / 1e9:.3f} s after the kill, {(served - restarted) / 1e9:.3f} s after the restart"
             if served else "none")
    return (f"| {os.path.basename(run.rstrip('/'))} | {'valid' if report['validity']['valid'] else 'INVALID'} "
            f"| {gate('G2.1 send skew p99').get('observed', '?')} / {gate('G2.4').get('observed', '?')} "
            f"| {killed / 1e9:.3f} / {restarted / 1e9:.3f} / {(up or 0) / 1e9:.3f} "
            f"| {len(through)}: {classes(through)}, the last ended {(last_end - killed) / 1e6:.1f} ms after the kill "
            f"| {len(down)}: {classes(down)} | {first} | {running(run, killed)} |")


def main():
    print("| run | validity | G2.1 skew p99 / G2.4 stall p99 | kill / restart / both UP (s from the epoch) "
          "| in flight through the proxy at the kill | sent while its port was closed "
          "| first served after the kill | vLLM running requests, before -> 1 s after the kill |")
    print("|---|---|---|---|---|---|---|---|")
    for run in sys.argv[1:]:
        print(row(run))


if __name__ == "__main__":
    main()
