#!/usr/bin/env python3
"""One row per run of the scale-out campaign (BENCHMARKS.md, the study's README).

Usage: summarize.py RUN_DIR... (each a `percentes scenario run` output folder holding run.pj
and report/report.json). Reads the report and the journal's timeline, request and scrape
records (through `percentes inspect`, PERCENTES_BIN or `percentes` on PATH); prints a Markdown
table: validity and the client gate; the new replica's way to useful capacity, each boundary
in seconds after the decision (process start, weights loaded, first ready answer, in service,
first request it served, and the intended time of the last request that did not complete);
the requests that did not complete, by class; how often HAProxy took the lone replica out
(`haproxy.log`); and the lone replica's vLLM queue (num_requests_waiting) at the decision, its
largest after it, and its last.
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


def waiting(run, source):
    """(received_ns, value) of `source`'s vllm:num_requests_waiting, scrape by scrape."""
    wid, values, series = None, {}, []
    for r in records(run, "scrape"):
        if r["source"] != source:
            continue
        for d in r.get("defined", []):
            if d["name"] == "vllm:num_requests_waiting":
                wid = d["id"]
        for s in r.get("samples", []):
            values[s["id"]] = s["value"]
        if wid is not None and r["received_ns"] and wid in values:
            series.append((r["received_ns"], values[wid]))
    return series


def row(run):
    report = json.load(open(os.path.join(run, "report", "report.json")))
    gates = {g["gate"]: g for g in report["validity"]["gates"]}
    gate = lambda prefix: next((g for name, g in gates.items() if name.startswith(prefix)), {})
    timeline = [e for e in records(run, "event") if e.get("kind_name") == "timeline"]
    at = lambda words: next((e["at_ns"] for e in timeline if words in e["detail"]), None)
    decided = at("scale-out: decided")
    if decided is None:
        return f"| {os.path.basename(run.rstrip('/'))} | no scale-out in the timeline |"
    weights = next((e["at_ns"] for e in timeline if e["subject"] == "weight-load"), None)
    in_service = at("in service: UP")
    after = lambda t: f"{(t - decided) / 1e9:.1f}" if t is not None else "-"
    requests = records(run, "request")
    served = min((r["request_written_ns"] for r in requests
                  if r.get("replica") == "replica-1" and r["outcome_name"] == "completed"), default=None)
    failed = [r for r in requests if r["outcome_name"] != "completed"]
    last_failed = max((r["intended_ns"] for r in failed), default=None)
    classes = collections.Counter(
        f"{r['class_name']}{' ' + str(r['http_status']) if r.get('http_status') else ''}" for r in failed)
    downs = sum(1 for line in open(os.path.join(run, "haproxy.log"))
                if "replica-0 is DOWN" in line and "Layer7 timeout" in line)
    queue = waiting(run, "replica-0")
    at_decision = next((v for t, v in reversed(queue) if t <= decided), float("nan"))
    peak = max((v for t, v in queue if t > decided), default=float("nan"))
    last = queue[-1][1] if queue else float("nan")
    return (f"| {os.path.basename(run.rstrip('/'))} | {'valid' if report['validity']['valid'] else 'INVALID'} "
            f"| {gate('G2.1 send skew p99').get('observed', '?')} / {gate('G2.4').get('observed', '?')} "
            f"| {decided / 1e9:.1f} | {after(at('scale-out: replica-1 started'))} / {after(weights)} / "
            f"{after(at('answers /health'))} / {after(in_service)} / {after(served)} / {after(last_failed)} "
            f"| {len(failed)}: {', '.join(f'{n} {c}' for c, n in classes.most_common()) or 'none'} "
            f"| {downs} | {at_decision:.0f} / {peak:.0f} / {last:.0f} |")


def main():
    print("| run | validity | G2.1 skew p99 / G2.4 stall p99 | decision (s from the epoch) "
          "| after it, s: process / weights / ready / in service / first served / last not completed "
          "| not completed (whole run) | HAProxy took replica-0 out (check timeout) "
          "| replica-0's vLLM queue: at the decision / largest after / last |")
    print("|---|---|---|---|---|---|---|---|")
    for run in sys.argv[1:]:
        print(row(run))


if __name__ == "__main__":
    main()
