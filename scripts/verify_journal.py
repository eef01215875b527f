#!/usr/bin/env python3
"""An independent verifier for percentes journal format v1, written from formats/JOURNAL.md alone.

It shares no code with the Rust implementation: it exists to show that JOURNAL.md is complete
enough for an auditor to check a journal without trusting percentes. Standard library only, plus
the optional `cryptography` package for ed25519 signatures (skipped, and said so, without it).

    python3 scripts/verify_journal.py JOURNAL [--expect-head HEX] [--json]
    python3 scripts/verify_journal.py JOURNAL --streams

Exit status 0 only for sealed-intact. `--streams` decodes every kind-8 stream record (JOURNAL.md
"8 stream") and judges it by the document's rules, printing one JSON object a record with its
verdict (`ok`, or the rule it breaks); verification itself checks only their framing. BLAKE3 is implemented here in pure Python (slow: about a
megabyte a second), which is fine for audits of small journals and for the test suite.
"""

import json
import math
import struct
import sys

# ---------------------------------------------------------------- BLAKE3 (hash and keyed hash)

IV = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19]
PERMUTATION = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8]
CHUNK_START, CHUNK_END, PARENT, ROOT, KEYED_HASH = 1, 2, 4, 8, 16
MASK = 0xFFFFFFFF


def _g(s, a, b, c, d, x, y):
    s[a] = (s[a] + s[b] + x) & MASK
    t = s[d] ^ s[a]
    s[d] = ((t >> 16) | (t << 16)) & MASK
    s[c] = (s[c] + s[d]) & MASK
    t = s[b] ^ s[c]
    s[b] = ((t >> 12) | (t << 20)) & MASK
    s[a] = (s[a] + s[b] + y) & MASK
    t = s[d] ^ s[a]
    s[d] = ((t >> 8) | (t << 24)) & MASK
    s[c] = (s[c] + s[d]) & MASK
    t = s[b] ^ s[c]
    s[b] = ((t >> 7) | (t << 25)) & MASK


def _compress(cv, block_words, counter, block_len, flags):
    s = list(cv) + IV[:4] + [counter & MASK, (counter >> 32) & MASK, block_len, flags]
    m = list(block_words)
    for round_index in range(7):
        _g(s, 0, 4, 8, 12, m[0], m[1])
        _g(s, 1, 5, 9, 13, m[2], m[3])
        _g(s, 2, 6, 10, 14, m[4], m[5])
        _g(s, 3, 7, 11, 15, m[6], m[7])
        _g(s, 0, 5, 10, 15, m[8], m[9])
        _g(s, 1, 6, 11, 12, m[10], m[11])
        _g(s, 2, 7, 8, 13, m[12], m[13])
        _g(s, 3, 4, 9, 14, m[14], m[15])
        if round_index < 6:
            m = [m[i] for i in PERMUTATION]
    return [s[i] ^ s[i + 8] for i in range(8)]


def _words(block):
    return list(struct.unpack("<16I", block.ljust(64, b"\0")))


def blake3(data, key=None):
    """The 32-byte BLAKE3 hash of data; keyed mode when a 32-byte key is given."""
    key_words = list(struct.unpack("<8I", key)) if key is not None else IV
    base = KEYED_HASH if key is not None else 0
    chunks = [data[i:i + 1024] for i in range(0, len(data), 1024)] or [b""]

    def chunk_node(index):
        chunk = chunks[index]
        blocks = [chunk[i:i + 64] for i in range(0, len(chunk), 64)] or [b""]
        cv = key_words
        for j, block in enumerate(blocks):
            flags = base | (CHUNK_START if j == 0 else 0) | (CHUNK_END if j == len(blocks) - 1 else 0)
            if j == len(blocks) - 1:
                return cv, _words(block), index, len(block), flags
            cv = _compress(cv, _words(block), index, 64, flags)

    def node(lo, hi):
        if hi - lo == 1:
            return chunk_node(lo)
        left = 1 << ((hi - lo - 1).bit_length() - 1)
        left_cv = _compress(*node(lo, lo + left))
        right_cv = _compress(*node(lo + left, hi))
        return key_words, left_cv + right_cv, 0, 64, base | PARENT

    cv, block_words, counter, block_len, flags = node(0, len(chunks))
    return struct.pack("<8I", *_compress(cv, block_words, counter, block_len, flags | ROOT))


assert blake3(b"").hex() == "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"

# ---------------------------------------------------------------- journal v1

MAGIC = b"PRCNTJNL"
BLOCK_MAGIC = b"BLK1"
CODEC = "bincode 2.0.1; config standard, little-endian, fixed-int, limit 1048576"
HEADER_BODY_MAX = 4194304
BLOCK_PAYLOAD_MAX = 4194304
RECORD_MAX = 1048576
LIST_MAX = 4096


class Damage(Exception):
    """The journal is not what its writer wrote."""

    def __init__(self, verdict, offset, what, record=None, expected=None, found=None):
        super().__init__(what)
        self.verdict, self.offset, self.what = verdict, offset, what
        self.record, self.expected, self.found = record, expected, found


class Reader:
    def __init__(self, data, pos, end):
        self.data, self.pos, self.end = data, pos, end

    def take(self, n, what):
        if self.pos + n > self.end:
            raise Damage("tampered", self.pos, "%s runs past its structure" % what)
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self, what):
        return self.take(1, what)[0]

    def u16(self, what):
        return struct.unpack("<H", self.take(2, what))[0]

    def u32(self, what):
        return struct.unpack("<I", self.take(4, what))[0]

    def u64(self, what):
        return struct.unpack("<Q", self.take(8, what))[0]

    def i64(self, what):
        return struct.unpack("<q", self.take(8, what))[0]

    def f64(self, what):
        return struct.unpack("<d", self.take(8, what))[0]

    # header primitives
    def h_bytes(self, what):
        return self.take(self.u32(what), what)

    def h_str(self, what):
        raw = self.h_bytes(what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Damage("tampered", self.pos, "%s is not UTF-8" % what)

    def h_opt(self, what, item):
        flag = self.u8(what)
        if flag not in (0, 1):
            raise Damage("tampered", self.pos - 1, "%s presence byte %d" % (what, flag))
        return item() if flag else None

    def h_list(self, what, item):
        n = self.u32(what)
        if n > LIST_MAX:
            raise Damage("tampered", self.pos - 4, "%s lists %d items" % (what, n))
        return [item() for _ in range(n)]

    # bincode primitives (JOURNAL.md "Records")
    def b_opt(self, what, item):
        flag = self.u8(what)
        if flag not in (0, 1):
            raise Damage("tampered", self.pos - 1, "%s option tag %d" % (what, flag))
        return item() if flag else None

    def b_bytes(self, what):
        return self.take(self.u64(what), what)


def parse_header(data):
    if len(data) == 0 or data[:min(8, len(data))] != MAGIC[:min(8, len(data))]:
        raise Damage("not-a-journal", 0, "the first bytes are not the journal magic")
    if len(data) < 10:
        raise Damage("unsealed-prefix", len(data), "the file ends inside the header")
    version = struct.unpack_from("<H", data, 8)[0]
    if version != 1:
        raise Damage("unsupported-version", 8, "format version %d" % version)
    if len(data) < 20:
        raise Damage("unsealed-prefix", len(data), "the file ends inside the header")
    flags, body_len, check = struct.unpack_from("<HII", data, 10)
    if flags != 0:
        raise Damage("tampered", 10, "header flags %#x" % flags)
    if check != (~body_len & MASK) or body_len > HEADER_BODY_MAX:
        raise Damage("tampered", 12, "header body length is damaged")
    end = 20 + body_len
    if len(data) < end + 32:
        raise Damage("unsealed-prefix", len(data), "the file ends inside the header")
    r = Reader(data, 20, end)
    h = {}
    h["codec"] = r.h_str("codec")
    if h["codec"] != CODEC:
        raise Damage("unsupported-version", 20, "record codec %r" % h["codec"])
    h["spec_version"] = r.h_str("spec version")
    h["tool_version"] = r.h_str("tool version")
    h["tool_commit"] = r.h_str("tool commit")
    h["profile"] = r.h_str("profile")
    h["dev_time_factor"] = r.u32("dev time factor")
    h["config_hash"] = r.take(32, "config hash")
    h["config"] = r.h_bytes("config bytes")
    h["seed"] = r.u64("seed")
    h["arrival"] = r.u8("arrival")
    h["phases"] = r.h_list("phases", lambda: (r.h_str("phase name"), r.u64("duration"), r.f64("rate")))
    h["routes"] = r.h_list("routes", lambda: (r.h_str("route label"), r.u32("weight")))
    h["inject_at_ns"] = r.h_opt("T_inject", lambda: r.u64("T_inject"))
    h["schedule_requests"] = r.u64("schedule requests")
    h["schedule_digest"] = r.take(32, "schedule digest")
    h["monotonic_epoch_ns"] = r.u64("monotonic epoch")
    h["realtime_epoch_ns"] = r.i64("realtime epoch")
    h["clock_source"] = r.h_str("clock source")
    h["host"] = r.h_list("host facts", lambda: (r.h_str("key"), r.h_str("value")))
    h["shard_index"] = r.u32("shard index")
    h["shard_count"] = r.u32("shard count")
    h["signing_key"] = r.h_opt("signing key", lambda: r.take(32, "signing key"))
    h["extensions"] = r.h_list("extensions", lambda: (r.h_str("key"), r.h_bytes("value")))
    if r.pos != end:
        raise Damage("tampered", r.pos, "bytes after the last header field")
    for what, pairs in (("host fact", h["host"]), ("extension", h["extensions"])):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise Damage("tampered", 20, "a %s key appears twice" % what)
    for key, value in h["extensions"]:
        if key == "schedule-rule" and value != b"\x02":
            raise Damage("tampered", 20, "schedule rule %r is not one this verifier knows" % value)
        if key == "workload":
            h["workload"] = parse_workload(value)
    if h["arrival"] not in (0, 1):
        raise Damage("tampered", 20, "arrival code %d" % h["arrival"])
    if blake3(h["config"]) != h["config_hash"]:
        raise Damage("tampered", 20, "the config bytes do not hash to the config hash")
    if h["shard_count"] == 0 or h["shard_index"] >= h["shard_count"]:
        raise Damage("tampered", end, "shard %d of %d" % (h["shard_index"], h["shard_count"]))
    computed = blake3(data[:end])
    if computed != data[end:end + 32]:
        raise Damage("tampered", end, "the header hash does not match",
                     expected=computed.hex(), found=data[end:end + 32].hex())
    return h, end + 32, computed


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def _draw(seed, stream, counter):
    return _mix(seed ^ _mix((counter * 2 + stream) & 0xFFFFFFFFFFFFFFFF))


def parse_workload(value):
    """JOURNAL.md "Schedule" rule 5: the `workload` extension's code byte and fields."""
    def bad(what):
        return Damage("tampered", 20, "workload extension: " + what)
    if not value:
        raise bad("empty")
    code = value[0]
    if code in (1, 2):
        if len(value) != 14:
            raise bad("%d bytes where 14 belong" % len(value))
        count, mean_ns, law = struct.unpack_from("<IQB", value, 1)
        if law not in (0, 1):
            raise bad("think law %d" % law)
        limit = 100000 if code == 1 else 10000
        if not 1 <= count <= limit:
            raise bad("count %d out of 1..%d" % (count, limit))
        model = "closed" if code == 1 else "semi-open"
        return dict(model=model, count=count, mean_ns=mean_ns, law=law, raw=value)
    if code == 3:
        if len(value) < 9:
            raise bad("cut short")
        (count,) = struct.unpack_from("<Q", value, 1)
        if count * 8 != len(value) - 9:
            raise bad("%d times in %d bytes" % (count, len(value) - 9))
        times = list(struct.unpack_from("<%dQ" % count, value, 9))
        if any(b < a for a, b in zip(times, times[1:])):
            raise bad("times go backwards")
        return dict(model="replay", times=times, raw=value)
    raise bad("code %d" % code)


def _listed_times(h, w):
    """The times of a closed or replayed schedule (rule 5), in order."""
    if w["model"] == "replay":
        return w["times"]
    phases = h["phases"]
    ramp = phases[0][1] if phases and phases[0][0] == "warmup" else 0
    return [i * ramp // w["count"] for i in range(w["count"])]


def schedule_digest(h):
    """JOURNAL.md "Schedule". Python's math.log is the platform's; the spec asks for fdlibm's
    e_log.c (libm 0.2.16's port), so on an exotic libm a last-bit difference could show as a mismatch."""
    w = h.get("workload")
    if w is None:
        acc = bytearray(b"percentes schedule v1")
    else:
        acc = bytearray(b"percentes schedule v2") + struct.pack("<I", len(w["raw"])) + w["raw"]
    total_weight = sum(weight for _, weight in h["routes"])

    def route_of(index):
        if len(h["routes"]) == 1:
            return 0
        pick = (_draw(h["seed"], 1, index) * total_weight) >> 64
        acc_weight = 0
        for i, (_, weight) in enumerate(h["routes"]):
            acc_weight += weight
            if pick < acc_weight:
                return i
        return len(h["routes"]) - 1

    if w is not None and w["model"] in ("closed", "replay"):
        ends, end = [], 0
        for _, duration, _ in h["phases"]:
            end += duration
            ends.append(end)
        phase = count = 0
        for index, at in enumerate(_listed_times(h, w)):
            while phase < len(ends) and at >= ends[phase]:
                phase += 1
            if phase == len(ends):
                break
            acc += struct.pack("<QQII", index, at, route_of(index), phase)
            count += 1
        return count, blake3(bytes(acc))
    # Schedule rule 2: a deterministic phase at the previous phase's rate continues its grid.
    rule2 = ("schedule-rule", b"\x02") in h["extensions"]
    index = draws = start = origin = within = 0
    previous_rate = None
    for phase_number, (_, duration, rate) in enumerate(h["phases"]):
        end = start + duration
        if not (rule2 and h["arrival"] == 1 and rate == previous_rate):
            origin, within = start, 0
        running = 0
        while True:
            if h["arrival"] == 1:
                at = origin + int(within * 1e9 / rate)
                if at >= end:
                    break
            else:
                u = ((_draw(h["seed"], 0, draws) >> 11) + 1) * (1.0 / (1 << 53))
                draws += 1
                offset = running + int(-math.log(u) / rate * 1e9)
                if offset >= duration:
                    break
                running = offset
                at = start + offset
            route = route_of(index)
            acc += struct.pack("<QQII", index, at, route, phase_number)
            index += 1
            within += 1
        start = end
        previous_rate = rate
    return index, blake3(bytes(acc))


def verify_signature(key, message, signature):
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from cryptography.exceptions import InvalidSignature
    except ImportError:
        return None
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(signature, message)
        return True
    except InvalidSignature:
        return False


def verify(data, expect_head=None, keep=()):
    """The verdict; with `keep`, the bodies of the record kinds it names, in order, as
    report["kept"] (kind, body)."""
    report = {"verdict": None, "records": 0, "counts": {}, "chain_head": None, "notes": [],
              "kept": []}
    counts = dict(requests=0, completed=0, errored=0, censored=0, undispatched=0,
                  events=0, telemetry=0, checkpoints=0, other=0)
    report["counts"] = counts
    heads = []
    try:
        header, pos, chain = parse_header(data)
        heads.append(chain)
        report["chain_head"] = chain.hex()
        next_record, sealed = 0, False
        while pos < len(data):
            rest = len(data) - pos
            if rest < 24:
                tail = data[pos:pos + 4]
                if tail == BLOCK_MAGIC[:len(tail)]:
                    raise Damage("unsealed-prefix", pos, "the file ends inside a block prefix", next_record)
                raise Damage("tampered", pos, "block magic missing", next_record)
            magic = data[pos:pos + 4]
            length, check, count, first = struct.unpack_from("<IIIQ", data, pos + 4)
            if magic != BLOCK_MAGIC:
                raise Damage("tampered", pos, "block magic missing", next_record)
            if check != (~length & MASK) or length > BLOCK_PAYLOAD_MAX:
                raise Damage("tampered", pos + 4, "block payload length is damaged", next_record)
            if first != next_record:
                raise Damage("tampered", pos + 16, "block out of sequence", next_record,
                             str(next_record), str(first))
            if count == 0:
                raise Damage("tampered", pos + 12, "block holds no record", next_record)
            end = pos + 24 + length
            if end + 32 > len(data):
                raise Damage("unsealed-prefix", pos, "the file ends inside a block", next_record)
            computed = blake3(data[pos:end], key=chain)
            if computed != data[end:end + 32]:
                raise Damage("tampered", pos, "chain value does not match", next_record,
                             computed.hex(), data[end:end + 32].hex())
            at = pos + 24
            for n in range(count):
                index = next_record + n
                if at + 5 > end:
                    raise Damage("tampered", at, "record frame cut off", index)
                body_len, kind = struct.unpack_from("<IB", data, at)
                if body_len > RECORD_MAX or at + 5 + body_len > end:
                    raise Damage("tampered", at, "record length runs past its block", index)
                body = data[at + 5:at + 5 + body_len]
                if kind in keep:
                    report["kept"].append((kind, body))
                if kind == 1:
                    if body_len <= 8 or body[8] > 3:
                        raise Damage("tampered", at, "undefined request outcome", index)
                    counts["requests"] += 1
                    counts[["completed", "errored", "censored", "undispatched"][body[8]]] += 1
                elif kind == 2:
                    counts["events"] += 1
                elif kind == 3:
                    counts["telemetry"] += 1
                elif kind in (4, 5):
                    if count != 1:
                        raise Damage("tampered", at, "a checkpoint or seal shares its block", index)
                    r = Reader(body, 0, len(body))
                    if kind == 4:
                        sequence, _, before = r.u64("sequence"), r.u64("at"), r.u64("records before")
                        chain_before = r.take(32, "chain before")
                        signed_part = body[:r.pos]
                        signature = r.b_opt("signature", lambda: r.take(64, "signature"))
                        if r.pos != len(body):
                            raise Damage("tampered", at, "checkpoint has extra bytes", index)
                        if sequence != counts["checkpoints"] or before != index or chain_before != chain:
                            raise Damage("tampered", at, "checkpoint disagrees with the chain", index)
                        domain = b"percentes journal v1 checkpoint\0"
                        counts["checkpoints"] += 1
                    else:
                        r.u64("at")
                        status = r.u8("status")
                        reason = r.b_bytes("reason")
                        before = r.u64("records before")
                        stated = [r.u64("count") for _ in range(9)]
                        chain_before = r.take(32, "chain before")
                        signed_part = body[:r.pos]
                        signature = r.b_opt("signature", lambda: r.take(64, "signature"))
                        if r.pos != len(body):
                            raise Damage("tampered", at, "seal has extra bytes", index)
                        if before != index or chain_before != chain:
                            raise Damage("tampered", at, "the seal disagrees with the chain", index)
                        recount = [counts[k] for k in ("requests", "completed", "errored", "censored",
                                                       "undispatched", "events", "telemetry",
                                                       "checkpoints", "other")]
                        if stated != recount:
                            raise Damage("tampered", at, "the seal's counts differ from the records",
                                         index, str(recount), str(stated))
                        if status > 2:
                            raise Damage("tampered", at, "undefined seal status", index)
                        try:
                            reason = reason.decode("utf-8")
                        except UnicodeDecodeError:
                            raise Damage("tampered", at, "the seal's reason is not UTF-8", index)
                        if status == 0 and reason:
                            raise Damage("tampered", at, "a completed seal gives a reason", index)
                        report["seal"] = {"status": ["completed", "aborted", "escaped"][status],
                                          "reason": reason}
                        domain = b"percentes journal v1 seal\0"
                        sealed = True
                    key = header["signing_key"]
                    if (key is None) != (signature is None):
                        raise Damage("tampered", at, "signature presence disagrees with the header", index)
                    if key is not None:
                        ok = verify_signature(key, domain + signed_part, signature)
                        if ok is False:
                            raise Damage("tampered", at, "a signature does not verify", index)
                        if ok is None and "signatures not checked" not in report["notes"]:
                            report["notes"].append("signatures not checked (pip install cryptography)")
                else:
                    counts["other"] += 1
                at += 5 + body_len
            if at != end:
                raise Damage("tampered", at, "bytes after the block's last record", next_record + count)
            chain = data[end:end + 32]
            heads.append(chain)
            report["chain_head"] = chain.hex()
            next_record += count
            report["records"] = next_record
            pos = end + 32
            if sealed:
                break
        if sealed and pos != len(data):
            raise Damage("tampered", pos, "bytes after the seal", next_record)
        if not sealed:
            raise Damage("unsealed-prefix", pos, "no seal", next_record)
        report["verdict"] = "sealed-intact"
        requests, digest = schedule_digest(header)
        report["schedule_digest"] = "matches" if (digest == header["schedule_digest"]
                                                  and requests == header["schedule_requests"]) else "DIFFERS"
    except Damage as damage:
        report["verdict"] = damage.verdict
        report["problem"] = {"record": damage.record, "byte_offset": damage.offset, "what": damage.what,
                             "expected": damage.expected, "found": damage.found}
    if expect_head is not None:
        if report["chain_head"] == expect_head:
            report["trusted_head"] = "final"
        elif expect_head in (h.hex() for h in heads):
            report["trusted_head"] = "prefix"
        else:
            report["trusted_head"] = "not on the chain"
            report["verdict"] = "tampered"
    return report


# ---------------------------------------------------------------- kind 8 (stream records)

DELIVERIES_MAX = 65536


def request_times(body):
    """A request record's index, dispatch and terminal times (JOURNAL.md "1 request")."""
    r = Reader(body, 0, len(body))
    index = r.u64("index")
    r.u8("outcome"), r.u16("class"), r.u32("route"), r.u64("intended")
    stamps = [r.b_opt("timestamp", lambda: r.u64("timestamp")) for _ in range(7)]
    return index, stamps[0], r.u64("terminal")


def decode_stream(body):
    r = Reader(body, 0, len(body))
    index = r.u64("index")
    kinds = [(r.u8("kind"), r.u64("first"), r.u64("last"), r.u32("deltas"))
             for _ in range(r.u64("kinds"))]
    reasoning = r.b_opt("reasoning tokens", lambda: r.u32("reasoning tokens"))
    deliveries = [(r.u32("gap"), r.u32("deltas")) for _ in range(r.u64("deliveries"))]
    total = r.u32("deliveries total")
    if r.pos != len(body):
        raise Damage("tampered", r.pos, "stream record has extra bytes")
    return {"index": index, "kinds": kinds, "reasoning_tokens": reasoning,
            "deliveries": deliveries, "deliveries_total": total}


def stream_rule(s, request):
    """The first of JOURNAL.md's kind-8 rules the record `s` breaks, or None. `request` is its
    request record's (dispatch, terminal) when the journal holds it."""
    kinds, deliveries, total = s["kinds"], s["deliveries"], s["deliveries_total"]
    if not kinds:
        return "rule 1: no kind of output"
    codes = [k[0] for k in kinds]
    if len(set(codes)) != len(codes):
        return "rule 1: a kind listed twice"
    for code, first, last, deltas in kinds:
        if deltas == 0 or first > last or (deltas == 1 and first != last):
            return "rule 1: kind %d's deltas and times disagree" % code
    deltas = sum(k[3] for k in kinds)
    if not deliveries:
        return "rule 2: no delivery"
    if deliveries[0][0] != 0 or any(g == 0 for g, _ in deliveries[1:]):
        return "rule 2: a delivery's gap"
    if any(d == 0 for _, d in deliveries) or len(deliveries) > DELIVERIES_MAX:
        return "rule 2: a delivery without a delta, or too many listed"
    if total < len(deliveries) or total > deltas:
        return "rule 2: the total of deliveries"
    carried = sum(d for _, d in deliveries)
    if total == len(deliveries):
        if carried != deltas:
            return "rule 3: the deliveries carry %d deltas, the kinds count %d" % (carried, deltas)
        span_us = (max(k[2] for k in kinds) - min(k[1] for k in kinds)) // 1000
        slack = len(deliveries) - 1
        if abs(sum(g for g, _ in deliveries) - span_us) > slack:
            return "rule 3: the gaps do not sum to the span"
    elif carried > deltas:
        return "rule 3: the listed deliveries carry more deltas than the kinds count"
    if request is not None:
        dispatched, terminal = request
        if dispatched is None:
            return "rule 4: the request was never dispatched"
        if min(k[1] for k in kinds) < dispatched or max(k[2] for k in kinds) > terminal:
            return "rule 4: output outside the request's dispatch and terminal times"
    return None


def streams(data):
    """Every stream record of a journal that verifies (or an unsealed prefix), judged."""
    report = verify(data, keep=(1, 8))
    requests = {}
    for kind, body in report["kept"]:
        if kind == 1:
            index, dispatched, terminal = request_times(body)
            requests[index] = (dispatched, terminal)
    out, seen = [], set()
    for kind, body in report["kept"]:
        if kind != 8:
            continue
        try:
            s = decode_stream(body)
        except Damage as damage:
            out.append({"verdict": "does not decode: %s" % damage.what})
            continue
        rule = "rule 5: a second stream record" if s["index"] in seen else None
        seen.add(s["index"])
        s["verdict"] = rule or stream_rule(s, requests.get(s["index"])) or "ok"
        out.append(s)
    return report["verdict"], out


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    expect = None
    if "--expect-head" in argv:
        expect = argv[argv.index("--expect-head") + 1].lower()
        args.remove(expect) if expect in args else None
    if len(args) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 1
    with open(args[0], "rb") as f:
        data = f.read()
    if "--streams" in argv:
        verdict, records = streams(data)
        for record in records:
            print(json.dumps(record, sort_keys=True))
        return 0 if verdict in ("sealed-intact", "unsealed-prefix") else 1
    report = verify(data, expect)
    del report["kept"]
    if "--json" in argv:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print("verdict: %s" % report["verdict"])
        print("records: %d; %s" % (report["records"], ", ".join("%s %d" % kv for kv in report["counts"].items())))
        if report.get("chain_head"):
            print("chain head: %s" % report["chain_head"])
        if report.get("schedule_digest"):
            print("schedule digest: %s" % report["schedule_digest"])
        for note in report["notes"]:
            print("note: %s" % note)
        if report.get("problem"):
            p = report["problem"]
            print("problem: record %s, byte %d: %s" % (p["record"], p["byte_offset"], p["what"]))
    return 0 if report["verdict"] == "sealed-intact" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
