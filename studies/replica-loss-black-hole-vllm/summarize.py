#!/usr/bin/env python3
"""One row per run of the partition-on-real-parts campaign (BENCHMARKS.md, the study's README).

Usage: summarize.py RUN_DIR... (each a `percentes scenario run` output folder holding run.pj
and report/report.json). Reads the report and the journal's events and request records
(through `percentes inspect`, PERCENTES_BIN or `percentes` on PATH); prints a Markdown table:
validity, the client gate, G3 and G4 as the report read them, HAProxy's detection and return
(the `detected` event and its UP note, seconds after the fire), the requests in flight on the
victim at the fire, and what became of the requests sent between the fire and the detection.
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


def row(run):
    report = json.load(open(os.path.join(run, "report", "report.json")))
    gates = {g["gate"]: g for g in report["validity"]["gates"]}
    gate = lambda prefix: next((g for name, g in gates.items() if name.startswith(prefix)), {})
    observed = lambda prefix: f"{gate(prefix).get('status', '?')}: {gate(prefix).get('observed', '')}"
    events = records(run, "event")
    fired = next(e["at_ns"] for e in events if e.get("kind_name") == "fault-fired")
    timeline = [e for e in events if e.get("kind_name") == "timeline"]
    detected = next((e["at_ns"] for e in timeline if e["subject"] == "detected"), None)
    back = next((e["at_ns"] for e in timeline
                 if e["subject"] == "orchestrator" and " UP " in e["detail"]), None)
    after = lambda at: f"{(at - fired) / 1e9:.2f} s" if at is not None else "never"
    victim = report["in_flight_at_fire"]["on_victim"]
    # Requests sent between the fire and HAProxy's detection: whom they reached and how late.
    window = []
    if detected is not None:
        for r in records(run, "request"):
            d = r.get("dispatched_ns")
            if d is None or not fired <= d < detected:
                continue
            e2e = (r["terminal_ns"] - r["intended_ns"]) / 1e9
            window.append((r.get("outcome_name"), r.get("replica") or "-", e2e))
    completed = sorted(e for o, _, e in window if o == "completed")
    late = sum(1 for e in completed if e >= 1.0)
    sent = (f"{len(window)} sent: {len(completed)} completed ({late} after >= 1 s, "
            f"slowest {completed[-1]:.2f} s), {sum(1 for o, _, _ in window if o == 'censored')} censored, "
            f"{sum(1 for o, _, _ in window if o == 'errored')} errored" if window else "-")
    return (f"| {os.path.basename(run.rstrip('/'))} | {'valid' if report['validity']['valid'] else 'INVALID'} "
            f"| {gate('G2.1 send skew p99').get('observed', '?')} / {gate('G2.4').get('observed', '?')} "
            f"| {observed('G3')} | {observed('G4')} | {after(detected)} | {after(back)} "
            f"| {victim['censored']} censored, {victim['errored']} errored, {victim['completed']} completed "
            f"| {sent} | {report['recovery'].get('node_loss_label', '?')} |")


def main():
    print("| run | validity | G2.1 skew p99 / G2.4 stall p99 | G3 | G4 | HAProxy DOWN after fire "
          "| UP again after fire | in flight on the victim at the fire | fire to detection "
          "| label |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run in sys.argv[1:]:
        print(row(run))


if __name__ == "__main__":
    main()
