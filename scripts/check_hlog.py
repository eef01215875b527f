#!/usr/bin/env python3
"""Decode a report's histograms.hlog with Python's HdrHistogram and compare it to report.json.

Usage: python3 scripts/check_hlog.py REPORT_DIR

An independent reading of percentes' interval logs: Python's `hdrhistogram` package (PyPI,
module `hdrh`) decodes every line, and its count, max and p50/p90/p95/p99/p99.9 must equal the
numbers report.json prints for the same window and latency. Prints one line per histogram and
exits 1 on any disagreement, 2 when the package is missing.

Percentiles here are nearest-rank, as percentes reports them (SPEC §9): the value of rank
ceil(q x n), read as its highest equivalent value. Java's and Python's own
getValueAtPercentile round the rank to the nearest integer instead, so at small n they can read
one rank lower; this script computes the nearest rank from the decoded counts itself, and prints
Python's own reading beside it where the two differ, for information.
"""

import math

import json
import sys
from pathlib import Path

try:
    from hdrh.histogram import HdrHistogram
except ImportError:
    print("the Python package `hdrhistogram` is not installed (pip install hdrhistogram)")
    sys.exit(2)

FIELDS = {
    "ttft": ("ttft",),
    "e2e": ("e2e",),
    "inter-chunk": ("inter_chunk",),
    "tpot": ("tokens", "tpot"),
    "itl-per-token": ("tokens", "itl_per_token"),
}


def nearest_rank(histogram, percent):
    """The highest equivalent value of the sample of rank ceil(percent/100 x n), at least 1."""
    total = histogram.get_total_count()
    rank = max(1, math.ceil(percent / 100.0 * total))
    for item in histogram.get_recorded_iterator():
        if item.total_count_to_this_value >= rank:
            return histogram.get_highest_equivalent_value(item.value_iterated_to)
    return None


def main(folder: Path) -> int:
    report = json.loads((folder / "report.json").read_text())
    windows = {w["window"]: w for w in report["windows"]}
    bad = 0
    seen = 0
    for line in (folder / "histograms.hlog").read_text().splitlines():
        if not line.startswith("Tag="):
            continue  # comments, the legend, untagged lines (percentes tags every line)
        fields = line.split(",")
        tag = fields[0][len("Tag="):]
        encoded = fields[-1]
        latency, window = tag.split(".", 1)
        expected = windows[window]
        for key in FIELDS[latency]:
            expected = expected[key]
        histogram = HdrHistogram.decode(encoded)
        got = {
            "n": histogram.get_total_count(),
            "max": histogram.get_max_value() if histogram.get_total_count() else None,
        }
        want = {"n": expected["n"], "max": expected["max_us"]}
        native = {}
        for name, value in expected["percentiles_us"]:
            percent = float(name[1:])
            got[name] = nearest_rank(histogram, percent)
            native[name] = histogram.get_value_at_percentile(percent)
            want[name] = value
        if expected["p99_9_us"] is not None:
            got["p99.9"] = nearest_rank(histogram, 99.9)
            want["p99.9"] = expected["p99_9_us"]
        seen += 1
        if got != want:
            bad += 1
            print(f"{tag}: DIFFERS python {got} report {want}")
        else:
            note = {k: v for k, v in native.items() if v != got[k]}
            extra = f"; Python's round-to-nearest rank reads {note}" if note else ""
            print(f"{tag}: agrees (n {got['n']}){extra}")
    if seen == 0:
        print("no tagged histograms found")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(1)
    sys.exit(main(Path(sys.argv[1])))
