#!/usr/bin/env python3
"""Send-skew statistics of a journal, from `percentes inspect JOURNAL --records --kind request` on
stdin: skew (dispatched minus intended) p50/p99/max, achieved vs requested rate, outcomes."""
import json
import sys

skews, dispatched, outcomes = [], [], {}
for line in sys.stdin:
    r = json.loads(line)
    outcomes[r["class_name"]] = outcomes.get(r["class_name"], 0) + 1
    if r["dispatched_ns"] is not None:
        skews.append(r["dispatched_ns"] - r["intended_ns"])
        dispatched.append(r["dispatched_ns"])
skews.sort()
def q(p):
    return skews[max(1, min(len(skews), int(-(-len(skews) * p // 1)))) - 1] / 1e6 if skews else float("nan")
span = (max(dispatched) - min(dispatched)) / 1e9 if len(dispatched) > 1 else float("nan")
print(json.dumps({
    "requests": len(skews),
    "skew_p50_ms": round(q(0.5), 3), "skew_p99_ms": round(q(0.99), 3), "skew_max_ms": round(skews[-1] / 1e6, 3) if skews else None,
    "achieved_rps": round((len(dispatched) - 1) / span, 1) if span == span and span > 0 else None,
    "outcomes": outcomes,
}))
