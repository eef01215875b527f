#!/usr/bin/env python3
"""Token figures of a journal's completed requests, from `percentes inspect JOURNAL --records
--kind request` on stdin, independently of the analyzer (which withholds every statistic of a
run that fails a client gate, as a 2-core host running its own engine does): classes, usage
coverage, completion tokens per content event, and TTFT, end-to-end and TPOT by nearest rank.
Descriptive only; SPEC §9's figures come from `percentes analyze`."""
import collections
import json
import math
import sys

classes, completed = collections.Counter(), []
for line in sys.stdin:
    r = json.loads(line)
    classes[r["class_name"]] += 1
    if r["outcome"] == 0:
        completed.append(r)


def rank(values, q):
    values = sorted(values)
    return values[max(1, math.ceil(q * len(values))) - 1] if values else None


with_usage = [r for r in completed if r["usage_completion_tokens"] is not None]
tpot = [
    (r["terminal_ns"] - r["first_content_ns"]) / 1e6 / (r["usage_completion_tokens"] - 1)
    for r in with_usage
    if r["usage_completion_tokens"] >= 2 and r["first_content_ns"] is not None
]
per_event = [r["usage_completion_tokens"] / r["content_events"] for r in with_usage if r["content_events"]]
ttft = [(r["first_content_ns"] - r["intended_ns"]) / 1e6 for r in completed if r["first_content_ns"]]
e2e = [(r["terminal_ns"] - r["intended_ns"]) / 1e6 for r in completed]
out = {
    "classes": dict(classes),
    "completed": len(completed),
    "with_usage": len(with_usage),
    "prompt_tokens": sum(r["usage_prompt_tokens"] or 0 for r in with_usage),
    "completion_tokens": sum(r["usage_completion_tokens"] for r in with_usage),
    "tokens_per_content_event_p50": rank(per_event, 0.5),
}
for name, values in [("ttft_ms", ttft), ("e2e_ms", e2e), ("tpot_ms", tpot)]:
    out[name] = {q: round(rank(values, p), 2) if values else None
                 for q, p in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]}
print(json.dumps(out, indent=1))
