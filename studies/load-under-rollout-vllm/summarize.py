#!/usr/bin/env python3
"""One row per run of the rollout and rollback campaigns (BENCHMARKS.md, the study's README).

Usage: summarize.py RUN_DIR... (each a `percentes scenario run` output folder holding run.pj
and report/report.json). Reads the report and the journal's timeline and request records
(through `percentes inspect`, PERCENTES_BIN or `percentes` on PATH); prints a Markdown table:
validity and the client gate, each rollout step's start-to-ready and drain, and each release's
measurement segment, with where its censored requests fell against the steps.
"""
import json
import os
import subprocess
import sys

BIN = os.environ.get("PERCENTES_BIN", "percentes")


def records(run, kind):
    out = subprocess.run([BIN, "inspect", os.path.join(run, "run.pj"), "--records", "--kind", kind],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def percentile(segment, which):
    for name, us in segment["ttft"]["percentiles_us"]:
        if name == which:
            return us / 1000.0
    return float("nan")


def row(run):
    report = json.load(open(os.path.join(run, "report", "report.json")))
    gates = {g["gate"]: g for g in report["validity"]["gates"]}
    g21 = gates.get("G2.1 send skew p99", {}).get("observed", "?")
    g24 = gates.get("G2.4 runtime stall p99", {}).get("observed", "?")
    events = [e for e in records(run, "event") if e.get("kind_name") == "timeline"]
    steps = []
    started = ready = None
    for e in events:
        at, detail = e["at_ns"] / 1e9, e["detail"]
        if " started, pid " in detail:
            started = at
        elif " in service: UP" in detail:
            ready = at
        elif " drained in " in detail or "drain timeout" in detail:
            steps.append(f"{started:.1f}-{ready:.1f} s, drain {at - ready:.1f} s")
    ended = [e["detail"].split(":")[0] for e in events
             if e["detail"].startswith(("rollout complete", "rollback complete"))]
    ended += ["stopped: " + e["detail"] for e in events if e["subject"] == "restart-failed"]
    releases = []
    for s in report["segments"]:
        if s["window"] != "measurement" or s["key"][0][0] != "release":
            continue
        o = s["outcomes"]
        releases.append(
            f"{s['key'][0][1]}: {s['scheduled']} sched, {o['errored']} err, {o['censored']} cens, "
            f"TTFT p50 {percentile(s, 'p50'):.0f} / p99 {percentile(s, 'p99'):.0f} ms")
    censored = [r for r in records(run, "request") if r.get("outcome_name") == "censored"]
    spans = sorted({int(r["intended_ns"] / 1e10) * 10 for r in censored})
    where = (f"{len(censored)} intended {spans[0]}-{spans[-1] + 10} s on "
             f"{', '.join(sorted({r.get('replica') or '-' for r in censored}))}") if censored else "none"
    return (f"| {os.path.basename(run.rstrip('/'))} | {'valid' if report['validity']['valid'] else 'INVALID'} "
            f"| {g21} | {g24} | {'; '.join(steps)} | {(ended or ['unfinished'])[0]} "
            f"| {'<br>'.join(releases)} | {where} |")


def main():
    print("| run | validity | G2.1 skew p99 | G2.4 stall p99 | steps (start to in service, s from the epoch; drain) | end "
          "| measurement by release | censored (intended, replica) |")
    print("|---|---|---|---|---|---|---|---|")
    for run in sys.argv[1:]:
        print(row(run))


if __name__ == "__main__":
    main()
