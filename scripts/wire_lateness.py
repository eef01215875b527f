#!/usr/bin/env python3
"""Wire lateness from a loopback packet capture (BENCHMARKS.md, "From the wire").

Reads a pcap written by `tcpdump -i lo --time-stamp-precision=nano` and finds the first segment
of every HTTP request sent to PORT (a TCP payload that starts with a method). Each request's
wire time is that segment's capture timestamp: when the kernel handed the bytes to loopback,
after the generator's write.

Two readings, printed as one JSON object:

- `grid`: against one constant-rate grid at RATE. The first SKIP seconds on the wire are left
  out for every tool alike (connects, and wrk2's start, where every connection sends at once);
  of the rest, the i-th request (in wire order) is due at t_0 + i / RATE, with t_0 the latest
  anchor at which no request is early (t_0 = min over i of t_i - i / RATE). This needs nothing
  from the tool, so it reads every generator alike: a tool that falls behind the rate, bunches
  requests or skips one shows it as lateness.
- `journal` (with --journal-records and --realtime-epoch-ns): against each request's own
  intended time from a percentes journal, matched by its `x-request-id: pct-INDEX` header:
  lateness = wire time - (the journal's realtime epoch + intended_ns).

Usage: wire_lateness.py CAPTURE.pcap PORT RATE [--skip-s SKIP] [--journal-records RECORDS.jsonl
       --realtime-epoch-ns NS]   (SKIP defaults to 1)
RECORDS.jsonl is `percentes inspect JOURNAL --records --kind request`.
"""

import json
import struct
import sys

METHODS = (b"GET ", b"POST ", b"PUT ", b"HEAD ")


def segments(path, port):
    """Yields (timestamp_ns, payload) for each TCP segment with data sent to `port`."""
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        if magic == 0xA1B23C4D:
            endian, scale = "<", 1
        elif magic == 0xA1B2C3D4:
            endian, scale = "<", 1000
        elif magic == 0x4D3CB2A1:
            endian, scale = ">", 1
        elif magic == 0xD4C3B2A1:
            endian, scale = ">", 1000
        else:
            sys.exit(f"{path}: not a pcap file (magic {magic:#x})")
        link = struct.unpack(endian + "I", head[20:24])[0]
        offsets = {1: 14, 113: 16, 276: 20, 0: 4}
        if link not in offsets:
            sys.exit(f"{path}: link type {link} is not read here (loopback is 1)")
        skip = offsets[link]
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, caplen, _ = struct.unpack(endian + "IIII", rec)
            data = f.read(caplen)
            ip = data[skip:]
            if len(ip) < 20 or ip[0] >> 4 != 4:
                continue
            ihl = (ip[0] & 0x0F) * 4
            total = struct.unpack(">H", ip[2:4])[0]
            if ip[9] != 6:
                continue
            tcp = ip[ihl:]
            if len(tcp) < 20:
                continue
            dport = struct.unpack(">H", tcp[2:4])[0]
            if dport != port:
                continue
            doff = (tcp[12] >> 4) * 4
            payload_len = total - ihl - doff
            if payload_len <= 0:
                continue
            yield sec * 1_000_000_000 + frac * scale, tcp[doff:]


def request_id(payload):
    """The INDEX of an `x-request-id: pct-INDEX` header in the captured bytes, if there."""
    at = payload.find(b"x-request-id: pct-")
    if at < 0:
        return None
    start = at + len(b"x-request-id: pct-")
    end = start
    while end < len(payload) and payload[end : end + 1].isdigit():
        end += 1
    return int(payload[start:end]) if end > start else None


def quantiles(values):
    values = sorted(values)
    n = len(values)
    if n == 0:
        return None

    def rank(q):
        return values[min(n - 1, max(0, int(-(-q * n // 1)) - 1))]

    return {
        "n": n,
        "p50_us": rank(0.50) / 1e3,
        "p99_us": rank(0.99) / 1e3,
        "p999_us": rank(0.999) / 1e3,
        "max_us": values[-1] / 1e3,
        "early": sum(1 for v in values if v < 0),
        "min_us": values[0] / 1e3,
    }


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    path, port, rate = args[0], int(args[1]), float(args[2])
    records = epoch = None
    if "--journal-records" in args:
        records = args[args.index("--journal-records") + 1]
        epoch = int(args[args.index("--realtime-epoch-ns") + 1])
    starts = [(ts, request_id(p)) for ts, p in segments(path, port) if p.startswith(METHODS)]
    starts.sort()
    skip = float(args[args.index("--skip-s") + 1]) if "--skip-s" in args else 1.0
    out = {"requests_on_the_wire": len(starts)}
    if starts:
        cut = [(ts, i) for ts, i in starts if ts >= starts[0][0] + skip * 1e9]
        period = 1e9 / rate
        offsets = [ts - i * period for i, (ts, _) in enumerate(cut)]
        t0 = min(offsets)
        out["grid"] = quantiles([o - t0 for o in offsets])
        out["grid_requests"] = len(cut)
        out["span_s"] = (starts[-1][0] - starts[0][0]) / 1e9
        out["achieved_rps"] = (len(starts) - 1) / out["span_s"] if out["span_s"] > 0 else None
    if records:
        intended = {}
        with open(records) as f:
            for line in f:
                r = json.loads(line)
                intended[r["index"]] = r["intended_ns"]
        wire = {}
        for ts, index in starts:
            if index is not None and index not in wire:
                wire[index] = ts
        late = [ts - (epoch + intended[i]) for i, ts in wire.items() if i in intended]
        out["journal"] = quantiles(late)
        out["journal_unmatched"] = len(intended) - len(late)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
