#!/usr/bin/env python3
"""An independent verifier for percentes journal format v1, written from formats/JOURNAL.md alone.

It shares no code with the Rust implementation: it exists to show that JOURNAL.md is complete
enough for an auditor to check a journal without trusting percentes. Standard library only, plus
the optional `cryptography` package for ed25519 signatures (skipped, and said so, without it).

    python3 scripts/verify_journal.py JOURNAL [--expect-head HEX] [--json]
    python3 scripts/verify_journal.py JOURNAL --streams
    python3 scripts/verify_journal.py JOURNAL --scrapes
    python3 scripts/verify_journal.py JOURNAL --follow-ups
    python3 scripts/verify_journal.py JOURNAL --timeline
    python3 scripts/verify_journal.py MANIFEST --manifest [--trusted-key HEX]

Exit status 0 only for sealed-intact. `--streams` decodes every kind-8 stream record (JOURNAL.md
"8 stream") and judges it by the document's rules, printing one JSON object a record with its
verdict (`ok`, or the rule it breaks); `--scrapes` does the same for kind-7 scrape records
(JOURNAL.md "7 scrape", "What a reader refuses"); verification itself checks only their framing.
`--follow-ups` judges every follow-up of a closed or semi-open journal against the model
(JOURNAL.md "Schedule" rule 5), one JSON object each; `--timeline` recomputes each external
timeline event's time from its detail and the header's epochs. `--manifest` checks a shard manifest and every file it names (JOURNAL.md "Manifest"), printing
`intact` or `refused` with every reason. BLAKE3 is implemented here in pure Python (slow: about a
megabyte a second), which is fine for audits of small journals and for the test suite.
"""

import json
import math
import re
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
        return self.utf8(self.h_bytes(what), what)

    def utf8(self, raw, what):
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
    # Step 3: the header hash first, so damage anywhere in the body (the codec string
    # included) reads tampered; step 4 decodes the body.
    computed = blake3(data[:end])
    if computed != data[end:end + 32]:
        raise Damage("tampered", end, "the header hash does not match",
                     expected=computed.hex(), found=data[end:end + 32].hex())
    r = Reader(data, 20, end)
    h = {}
    h["codec"] = r.h_str("codec")
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
        if key == "prefix-pool":
            h["prefix_pool"] = parse_prefix_pool(value)
        if key == "abandonment":
            h["abandonment"] = parse_abandonment(value)
        if key == "conversation-history":
            # Rule 8: form 1, each turn resends its session's earlier user turns.
            if value != b"\x01":
                raise Damage("tampered", 20, "conversation-history extension: form %r" % value)
            h["history"] = value
    if h["arrival"] not in (0, 1):
        raise Damage("tampered", 20, "arrival code %d" % h["arrival"])
    if blake3(h["config"]) != h["config_hash"]:
        raise Damage("tampered", 20, "the config bytes do not hash to the config hash")
    if h["profile"] not in ("experiment", "dev", "hosted"):
        raise Damage("tampered", 20, "profile %r" % h["profile"])
    factor = h["dev_time_factor"]
    if not (1 <= factor <= 1000 if h["profile"] == "dev" else factor == 1):
        raise Damage("tampered", 20, "dev time factor %d under profile %s" % (factor, h["profile"]))
    if h["shard_count"] == 0 or h["shard_index"] >= h["shard_count"]:
        raise Damage("tampered", end, "shard %d of %d" % (h["shard_index"], h["shard_count"]))
    # Only a header that decodes whole, written with another codec, is another version.
    if h["codec"] != CODEC:
        raise Damage("unsupported-version", 20, "record codec %r" % h["codec"])
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


def parse_prefix_pool(value):
    """JOURNAL.md "Schedule" rule 6: the `prefix-pool` extension (the draw itself is not needed
    to regenerate the digest, which hashes the value; `prefix_of` gives it)."""
    def bad(what):
        return Damage("tampered", 20, "prefix-pool extension: " + what)
    if len(value) < 13 or value[0] != 1:
        raise bad("format byte or length")
    entries, share_ppm, n = struct.unpack_from("<III", value, 1)
    if not 1 <= n <= 1000 or len(value) != 13 + 4 * n:
        raise bad("%d lengths in %d bytes" % (n, len(value)))
    lengths = list(struct.unpack_from("<%dI" % n, value, 13))
    if not 1 <= entries <= 10000 or not 1 <= share_ppm <= 1000000:
        raise bad("entries %d, share %d ppm" % (entries, share_ppm))
    if any(not 1 <= t <= 32768 for t in lengths):
        raise bad("a length out of 1..32768")
    return dict(entries=entries, share_ppm=share_ppm, lengths=lengths, raw=value)


def parse_abandonment(value):
    """JOURNAL.md "Schedule" rule 7: the `abandonment` extension."""
    def bad(what):
        return Damage("tampered", 20, "abandonment extension: " + what)
    if len(value) != 14 or value[0] != 1:
        raise bad("format byte or length")
    share_ppm, mean_ns, law = struct.unpack_from("<IQB", value, 1)
    if not 1 <= share_ppm <= 1000000 or mean_ns > 3600 * 10 ** 9 or law not in (0, 1):
        raise bad("share %d ppm, mean %d ns, law %d" % (share_ppm, mean_ns, law))
    return dict(share_ppm=share_ppm, mean_ns=mean_ns, law=law, raw=value)


def abandon_delay(h, index):
    """JOURNAL.md "Schedule" rule 7: request `index`'s delay to its abandonment, ns, or None."""
    a = h.get("abandonment")
    if a is None:
        return None
    d = _mix(h["seed"] ^ _mix(index ^ 0x6162616E646F6E00))
    if d % 1000000 >= a["share_ppm"]:
        return None
    if a["law"] == 0:
        return a["mean_ns"]
    u = ((_mix(d) >> 11) + 1) * (1.0 / (1 << 53))
    return int(-math.log(u) * float(a["mean_ns"]))


def prefix_of(h, session):
    """JOURNAL.md "Schedule" rule 6: the pool entry session `session` opens with, or None."""
    pool = h.get("prefix_pool")
    if pool is None:
        return None
    d = _mix(h["seed"] ^ _mix(session ^ 0x7072656669780000))
    if d % 1000000 >= pool["share_ppm"]:
        return None
    return _mix(d) % pool["entries"]


def _listed_times(h, w):
    """The times of a closed or replayed schedule (rule 5), in order."""
    if w["model"] == "replay":
        return w["times"]
    phases = h["phases"]
    ramp = phases[0][1] if phases and phases[0][0] == "warmup" else 0
    return [i * ramp // w["count"] for i in range(w["count"])]


def regenerable(h):
    """JOURNAL.md "Schedule" step 2: a phase whose rate is not finite, is 0 or below, is above
    1,000,000, or whose rate times duration exceeds 2^31 requests names no schedule."""
    for _, duration, rate in h["phases"]:
        if not math.isfinite(rate) or rate <= 0 or rate > 1e6:
            return False
        if rate * (duration / 1e9) > 2 ** 31:
            return False
    return True


def schedule_digest(h):
    """JOURNAL.md "Schedule". Python's math.log is the platform's; the spec asks for fdlibm's
    e_log.c (libm 0.2.16's port), so on an exotic libm a last-bit difference could show as a mismatch."""
    w = h.get("workload")
    if w is None:
        acc = bytearray(b"percentes schedule v1")
    else:
        acc = bytearray(b"percentes schedule v2") + struct.pack("<I", len(w["raw"])) + w["raw"]
    pool = h.get("prefix_pool")
    if pool is not None:
        acc += b"prefix-pool" + struct.pack("<I", len(pool["raw"])) + pool["raw"]
    abandon = h.get("abandonment")
    if abandon is not None:
        acc += b"abandonment" + struct.pack("<I", len(abandon["raw"])) + abandon["raw"]
    history = h.get("history")
    if history is not None:
        acc += b"conversation-history" + struct.pack("<I", len(history)) + history
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
        if not regenerable(header):
            report["schedule_digest"] = "not regenerable"
        else:
            requests, digest = schedule_digest(header)
            report["schedule_digest"] = "matches" if (digest == header["schedule_digest"]
                                                      and requests == header["schedule_requests"]) else "DIFFERS"
        if header.get("prefix_pool") is not None:
            # Rule 6: how many of the schedule's own requests (each its own session; a closed
            # or semi-open run's follow-ups take their session's) drew each entry, and none.
            drawn = {}
            for index in range(header["schedule_requests"]):
                entry = prefix_of(header, index)
                key = "none" if entry is None else str(entry)
                drawn[key] = drawn.get(key, 0) + 1
            report["prefix_draws"] = drawn
        if header.get("abandonment") is not None:
            # Rule 7: how many of the schedule's own requests are marked, and their delays' sum.
            delays = [abandon_delay(header, i) for i in range(header["schedule_requests"])]
            marked = [x for x in delays if x is not None]
            report["abandon_marked"] = {"count": len(marked), "delay_ns_sum": sum(marked)}
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


def _b_str(r, what):
    return r.utf8(r.b_bytes(what), what)


def _b_bool(r, what):
    flag = r.u8(what)
    if flag not in (0, 1):
        raise Damage("tampered", r.pos - 1, "%s is not a bool (%d)" % (what, flag))
    return flag == 1


def decode_scrape(body):
    """A kind-7 record (JOURNAL.md "7 scrape")."""
    r = Reader(body, 0, len(body))
    s = {"source": _b_str(r, "source"), "sent": r.u64("sent"), "received": r.u64("received"),
         "first": _b_bool(r, "first"), "restarted": _b_bool(r, "restarted")}
    s["defined"] = [(r.u32("id"), r.u8("kind"), _b_str(r, "family"), _b_str(r, "name"),
                     [(_b_str(r, "label"), _b_str(r, "value")) for _ in range(r.u64("labels"))])
                    for _ in range(r.u64("defined"))]
    s["samples"] = [(r.u32("id"), r.f64("value")) for _ in range(r.u64("samples"))]
    s["gone"] = [r.u32("id") for _ in range(r.u64("gone"))]
    if r.pos != len(body):
        raise Damage("tampered", r.pos, "scrape record has extra bytes")
    return s


SOURCE_SERIES_MAX = 16384


def scrape_rule(s, state):
    """The first of JOURNAL.md's kind-7 rules the record `s` breaks, or None; `state` is its
    source's, updated when it breaks none."""
    if s["sent"] > s["received"]:
        return "rule 1: received before it was sent"
    if state["records"] and s["sent"] < state["last_received"]:
        return "rule 1: sent before the previous answer was received"
    if s["first"] != (state["records"] == 0) or (s["first"] and s["restarted"]):
        return "rule 2: first"
    kinds, gone = list(state["kinds"]), list(state["gone"])
    defined_from = len(kinds)
    for id_, kind, _, _, _ in s["defined"]:
        if id_ != len(kinds):
            return "rule 3: series %d is not the next id (%d)" % (id_, len(kinds))
        if kind > 3:
            return "rule 3: kind %d" % kind
        if len(kinds) >= SOURCE_SERIES_MAX:
            return "rule 3: too many series"
        kinds.append(kind)
        gone.append(False)
    read = set()
    for id_, value in s["samples"]:
        if id_ >= len(kinds):
            return "rule 4: series %d is not defined" % id_
        if id_ in read:
            return "rule 4: series %d read twice" % id_
        read.add(id_)
        increase = not s["first"] and not s["restarted"] and id_ < defined_from and not gone[id_]
        if kinds[id_] in (2, 3) and increase and value < 0:
            return "rule 6: a negative increase of series %d" % id_
    if any(d[0] not in read for d in s["defined"]):
        return "rule 4: a series defined without its reading"
    said = set()
    for id_ in s["gone"]:
        if id_ >= defined_from or id_ in read or id_ in said or gone[id_]:
            return "rule 5: series %d cannot be gone here" % id_
        said.add(id_)
    for id_ in read:
        gone[id_] = False
    for id_ in s["gone"]:
        gone[id_] = True
    state.update(records=state["records"] + 1, last_received=s["received"], kinds=kinds, gone=gone)
    return None


def scrapes(data):
    """Every scrape record of a journal that verifies (or an unsealed prefix), judged in order,
    each source's rules over its own records."""
    report = verify(data, keep=(7,))
    out, states = [], {}
    for _, body in report["kept"]:
        try:
            s = decode_scrape(body)
        except Damage as damage:
            out.append({"verdict": "does not decode: %s" % damage.what})
            continue
        state = states.setdefault(s["source"], {"records": 0, "last_received": 0, "kinds": [],
                                                "gone": []})
        verdict = scrape_rule(s, state) or "ok"
        out.append({"source": s["source"], "sent": s["sent"], "received": s["received"],
                    "defined": len(s["defined"]), "samples": len(s["samples"]),
                    "gone": len(s["gone"]), "verdict": verdict})
    return report["verdict"], out


# ---------------------------------------------------------------- follow-ups ("Schedule" rule 5)

U64 = 0xFFFFFFFFFFFFFFFF


def think_ns(h, w, session, turn):
    """A follow-up's think time: the mean under `fixed`; under `exponential`, each step one
    binary64 operation in the order JOURNAL.md gives."""
    if w["law"] == 0:
        return w["mean_ns"]
    counter = (_mix(session ^ 0x7468696E6B000000) + turn) & U64
    d = _mix(h["seed"] ^ _mix(counter))
    u = ((d >> 11) + 1) * (1.0 / (1 << 53))
    product = -math.log(u) * float(w["mean_ns"])
    return min(int(product), U64)


def _request_entry(body):
    """A request record's index, route, intended and terminal times."""
    r = Reader(body, 0, len(body))
    index = r.u64("index")
    r.u8("outcome"), r.u16("class")
    route, intended = r.u32("route"), r.u64("intended")
    for _ in range(7):
        r.b_opt("timestamp", lambda: r.u64("timestamp"))
    return index, route, intended, r.u64("terminal")


def _extension(body):
    """A kind-6 request extension: its index and its (key, value) pairs."""
    r = Reader(body, 0, len(body))
    index, count = r.u64("index"), r.u64("fields")
    return index, dict((r.u16("key"), r.u64("value")) for _ in range(count))


def follow_ups(data):
    """Every follow-up of a closed or semi-open journal, judged against the model: its
    intended time is the previous turn's terminal time plus the think time, on its session's
    route, before the schedule's end, and (semi-open) within the session's turns."""
    report = verify(data, keep=(1, 6))
    if report["verdict"] not in ("sealed-intact", "unsealed-prefix"):
        return report["verdict"], []
    h, _, _ = parse_header(data)
    w = h.get("workload")
    if w is None or w["model"] not in ("closed", "semi-open"):
        return report["verdict"], []
    entries, turns = {}, {}
    for kind, body in report["kept"]:
        if kind == 1:
            index, route, intended, terminal = _request_entry(body)
            entries[index] = (route, intended, terminal)
        else:
            index, fields = _extension(body)
            if 5 in fields and 6 in fields:
                turns[index] = (fields[5], fields[6])
    by_turn = {st: index for index, st in turns.items()}
    end = sum(duration for _, duration, _ in h["phases"])
    out = []
    for index in sorted(i for i in entries if i >= h["schedule_requests"]):
        route, intended, _ = entries[index]
        judged = {"index": index, "intended": intended}
        if index not in turns:
            out.append(dict(judged, verdict="no session and turn"))
            continue
        session, turn = turns[index]
        judged.update(session=session, turn=turn)
        previous = session if turn == 1 else by_turn.get((session, turn - 1))
        if turn == 0 or session >= h["schedule_requests"] or previous not in entries:
            out.append(dict(judged, verdict="no previous turn"))
            continue
        expected = min(entries[previous][2] + think_ns(h, w, session, turn), U64)
        if w["model"] == "semi-open" and turn >= w["count"]:
            verdict = "turn %d of a session of %d" % (turn, w["count"])
        elif expected >= end:
            verdict = "the model gives none: %d is at or past the schedule's end" % expected
        elif intended != expected:
            verdict = "intended %d, the model says %d" % (intended, expected)
        elif route != entries[session][0]:
            verdict = "route %d, its session's is %d" % (route, entries[session][0])
        else:
            verdict = "ok"
        out.append(dict(judged, verdict=verdict))
    return report["verdict"], out


# ---------------------------------------------------------------- external timeline events (kind 2)

EXTERNAL = re.compile(r"\(external: stated (?:at (\d+) ns on (CLOCK_MONOTONIC|CLOCK_REALTIME);|no time:) "
                      r"read at (\d+) ns from the epoch\)$")


def timeline(data):
    """Every `timeline` event (kind 2, code 21) an orchestrator sent through the events socket,
    its `at` recomputed from the time its detail states and the header's two epochs: the stated
    time minus field 16 (CLOCK_MONOTONIC) or field 17 (CLOCK_REALTIME), never negative and at
    most 1 s after it was read; the read time where none was stated."""
    report = verify(data, keep=(2,))
    if report["verdict"] not in ("sealed-intact", "unsealed-prefix"):
        return report["verdict"], []
    h, _, _ = parse_header(data)
    out = []
    for _, body in report["kept"]:
        r = Reader(body, 0, len(body))
        at, kind = r.u64("at"), r.u16("kind")
        subject, detail = _b_str(r, "subject"), _b_str(r, "detail")
        match = EXTERNAL.search(detail)
        if kind != 21 or match is None:
            continue
        stated, clock, read = match.group(1), match.group(2), int(match.group(3))
        if stated is None:
            expected = read
        else:
            epoch = h["monotonic_epoch_ns"] if clock == "CLOCK_MONOTONIC" else h["realtime_epoch_ns"]
            expected = int(stated) - epoch
        if expected < 0 or expected > read + 1_000_000_000:
            verdict = "the stated time is %d ns from the epoch, outside 0 .. read + 1 s" % expected
        elif at != expected:
            verdict = "at %d, the detail states %d" % (at, expected)
        else:
            verdict = "ok"
        out.append({"subject": subject, "at": at, "verdict": verdict})
    return report["verdict"], out


# ---------------------------------------------------------------- manifests (JOURNAL.md "Manifest")

SHARD_KEYS = ("index", "file", "file_bytes", "chain_head", "seal", "requests", "hostname",
              "boot_id", "clock", "start_late_ms")
MANIFEST_KEYS = ("manifest_version", "config_hash", "schedule_digest", "schedule_requests",
                 "shard_count", "epoch_realtime_ns", "shards", "binding", "signature")
PIN_START_LATE_MAX_MS, PIN_CLOCK_ERROR_MAX_MS = 50.0, 10.0


def _once(pairs):
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError("key %s appears twice" % twice[0])
    return dict(pairs)


def _exact(obj, keys, where):
    if not isinstance(obj, dict) or set(obj) != set(keys):
        found = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise ValueError("%s's keys are %s, not %s" % (where, found, list(keys)))


def _lower_hex(text, digits):
    return isinstance(text, str) and len(text) == digits and all(c in "0123456789abcdef" for c in text)


def _facts(header):
    return dict(header["host"])


def _shard_limits(config_bytes):
    """The merge limits in force: the shared configuration's own `[shards]` values, which may only
    be stricter than the pins, or the pins."""
    late, clock = PIN_START_LATE_MAX_MS, PIN_CLOCK_ERROR_MAX_MS
    try:
        import tomllib
        shards = tomllib.loads(config_bytes.decode("utf-8")).get("shards", {})
        late = min(late, float(shards.get("start_late_max_ms", late)))
        clock = min(clock, float(shards.get("clock_error_max_ms", clock)))
    except (ImportError, ValueError, TypeError, AttributeError, UnicodeDecodeError):
        pass
    return int(late * 1e6), int(clock * 1e6)


def verify_manifest(path, trusted=None):
    """Every reason the manifest at `path` fails, or none (JOURNAL.md "Manifest")."""
    import os
    with open(path, "rb") as f:
        raw = f.read()
    try:
        m = json.loads(raw.decode("utf-8"), object_pairs_hook=_once)
        _exact(m, MANIFEST_KEYS, "the manifest")
        if m["manifest_version"] != 1:
            raise ValueError("manifest version %r" % m["manifest_version"])
        if not isinstance(m["shards"], list):
            raise ValueError("shards is not a list")
        for k, entry in enumerate(m["shards"]):
            _exact(entry, SHARD_KEYS, "shard entry %d" % k)
        if m["signature"] is not None:
            _exact(m["signature"], ("public_key", "signature"), "the signature")
    except (UnicodeDecodeError, ValueError) as e:
        return ["not a shard manifest: %s" % e]
    why = []
    hexes = [("config_hash", m["config_hash"], 64), ("schedule_digest", m["schedule_digest"], 64),
             ("binding", m["binding"], 64)]
    hexes += [("chain_head", e["chain_head"], 64) for e in m["shards"]]
    if m["signature"] is not None:
        hexes += [("signature.public_key", m["signature"]["public_key"], 64),
                  ("signature.signature", m["signature"]["signature"], 128)]
    why += ["%s is not %d lowercase hex digits" % (f, d) for f, t, d in hexes if not _lower_hex(t, d)]
    if why:
        return why
    if [e["index"] for e in m["shards"]] != list(range(m["shard_count"])):
        why.append("the shards are not listed once each as 0..N-1")
    binding_input = b"percentes shard manifest v1\0" + bytes.fromhex(m["config_hash"])
    binding_input += bytes.fromhex(m["schedule_digest"])
    binding_input += struct.pack("<QIq", m["schedule_requests"], m["shard_count"], m["epoch_realtime_ns"])
    for e in m["shards"]:
        binding_input += struct.pack("<IQ", e["index"], e["file_bytes"]) + bytes.fromhex(e["chain_head"])
    binding = blake3(binding_input)
    if binding.hex() != m["binding"]:
        why.append("the fields bind to %s, the manifest records %s" % (binding.hex(), m["binding"]))
    elif m["signature"] is None:
        if trusted is not None:
            why.append("not signed, and a trusted key was given")
    else:
        key = bytes.fromhex(m["signature"]["public_key"])
        if trusted is not None and key.hex() != trusted:
            why.append("signed by another key than the trusted one")
        message = b"percentes shard manifest v1 signature\0" + binding
        good = verify_signature(key, message, bytes.fromhex(m["signature"]["signature"]))
        if good is False:
            why.append("the signature does not verify over the binding")
    if why:
        return why
    folder = os.path.dirname(os.path.abspath(path))
    shards = []
    for e in m["shards"]:
        name = e["file"]
        try:
            with open(os.path.join(folder, name), "rb") as f:
                data = f.read()
        except OSError as err:
            why.append("shard %d: %s cannot be read: %s" % (e["index"], name, err))
            continue
        report = verify(data)
        if report["verdict"] != "sealed-intact":
            why.append("shard %d: %s is %s" % (e["index"], name, report["verdict"]))
            continue
        header, _, _ = parse_header(data)
        shards.append((e, name, data, report, header))
    if why:
        return why
    first = shards[0][4] if shards else None
    late_max_ns, clock_max_ns = _shard_limits(first["config"]) if first else (0, 0)
    boot = _facts(first).get("boot-id", "") if first else ""
    one_clock = boot != "" and all(_facts(h).get("boot-id", "") == boot for *_, h in shards)
    for e, name, data, report, h in shards:
        facts = _facts(h)
        if h["shard_index"] != e["index"]:
            why.append("shard %d: %s holds shard %d" % (e["index"], name, h["shard_index"]))
            continue
        if len(data) != e["file_bytes"] or report["chain_head"] != e["chain_head"]:
            why.append("shard %d: %s is not the file the manifest bound (length or chain head)" % (e["index"], name))
        bound = (h["config_hash"].hex(), h["schedule_digest"].hex(), h["schedule_requests"],
                 h["shard_count"], h["realtime_epoch_ns"])
        if bound != (m["config_hash"], m["schedule_digest"], m["schedule_requests"], m["shard_count"],
                     m["epoch_realtime_ns"]):
            why.append("shard %d: %s records another configuration, schedule, shard count or epoch" % (e["index"], name))
        late_text = facts.get("shard-start-late-ns", "")
        late = int(late_text) if late_text.isdigit() else None
        restated = {
            "seal": report["seal"]["status"], "requests": report["counts"]["requests"],
            "hostname": facts.get("hostname", ""), "boot_id": facts.get("boot-id", ""),
            "clock": "%s; maxerror %s us" % (facts.get("clock-sync", ""), facts.get("clock-maxerror-us", "")),
            "start_late_ms": late / 1e6 if late is not None else 0.0,
        }
        for key, value in restated.items():
            if e[key] != value:
                why.append("shard %d: %s is %r in the manifest, %r in %s" % (e["index"], key, e[key], value, name))
        k, n, total = h["shard_index"], h["shard_count"], h["schedule_requests"]
        share = (total - k - 1) // n + 1 if k < total else 0
        if report["seal"]["status"] == "completed" and report["counts"]["requests"] != share:
            why.append("shard %d: %s holds %d requests, its share is %d" % (k, name, report["counts"]["requests"], share))
        if late is None:
            why.append("shard %d: %s has no shard-start-late-ns fact" % (k, name))
        elif late > late_max_ns:
            why.append("shard %d: %s started %d ns late" % (k, name, late))
        if not one_clock:
            sync, maxerror = facts.get("clock-sync", ""), facts.get("clock-maxerror-us", "")
            if not sync.startswith("synchronized"):
                why.append("shard %d: its clock is not synchronized, on another host" % k)
            elif not maxerror.isdigit():
                why.append("shard %d: no clock error bound" % k)
            elif int(maxerror) * 1000 > clock_max_ns:
                why.append("shard %d: clock error bound %s us over the limit" % (k, maxerror))
    return why


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    expect = None
    if "--expect-head" in argv:
        expect = argv[argv.index("--expect-head") + 1].lower()
        args.remove(expect) if expect in args else None
    trusted = None
    if "--trusted-key" in argv:
        trusted = argv[argv.index("--trusted-key") + 1].lower()
        args.remove(trusted) if trusted in args else None
    if len(args) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 1
    if "--manifest" in argv:
        why = verify_manifest(args[0], trusted)
        print(json.dumps({"verdict": "refused" if why else "intact", "why": why}, indent=2))
        return 1 if why else 0
    with open(args[0], "rb") as f:
        data = f.read()
    modes = {"--streams": streams, "--scrapes": scrapes, "--follow-ups": follow_ups,
             "--timeline": timeline}
    mode = next((modes[a] for a in argv if a in modes), None)
    if mode is not None:
        verdict, records = mode(data)
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
