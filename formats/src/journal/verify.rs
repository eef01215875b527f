//! Verifies a journal's bytes: framing, the hash chain, checkpoints, signatures, the seal.
//!
//! Verification is a pure function of the bytes and the options. It never panics on any input and
//! reads each byte once, front to back; the caller may release what lies behind the reported
//! progress (the analyzer drops pages of its memory map that way, so memory stays flat).

use serde::{Serialize, Serializer};

use super::header::Header;
use super::records::{Counts, Outcome, RecordKind, REQUEST_OUTCOME_OFFSET};
mod checks;
use checks::{problem, verify_control, verify_header};

use super::{
    chain_step, hex, BLOCK_MAGIC, BLOCK_PAYLOAD_BYTES_MAX, BLOCK_PREFIX_BYTES, HASH_BYTES,
    RECORD_BYTES_MAX, RECORD_PREFIX_BYTES,
};

/// The five verdicts (SPEC §J.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every block verifies and the seal closes the file; its counts match the records.
    SealedIntact,
    /// Every complete block verifies, but the file ends before a seal (crash, kill, torn tail).
    UnsealedPrefix,
    /// Some byte differs from what the writer wrote, or records were moved, removed or added.
    Tampered,
    /// The file does not start with the journal magic.
    NotAJournal,
    /// A journal of a format version this build does not read.
    UnsupportedVersion,
}

impl Verdict {
    /// Its name in `verify` output (`sealed-intact`, `unsealed-prefix`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::SealedIntact => "sealed-intact",
            Verdict::UnsealedPrefix => "unsealed-prefix",
            Verdict::Tampered => "tampered",
            Verdict::NotAJournal => "not-a-journal",
            Verdict::UnsupportedVersion => "unsupported-version",
        }
    }
}

/// What the auditor trusts from outside the file.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// A chain head kept outside the file (printed at a checkpoint or the seal, or cited by a report).
    pub expect_head: Option<[u8; 32]>,
    /// The operator's ed25519 public key: the journal must be signed by it.
    pub trusted_key: Option<[u8; 32]>,
}

/// Why `--expect-head` or `--pubkey` cannot be trusted as given.
#[derive(Debug)]
pub enum TrustError {
    /// `--expect-head` is not 64 hex digits.
    Head {
        /// The text given.
        text: String,
    },
    /// `--pubkey`'s file is not a public key.
    Key(super::keys::KeyError),
}

impl std::fmt::Display for TrustError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrustError::Head { text } => write!(f, "--expect-head {text:?} is not 64 hex digits"),
            TrustError::Key(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TrustError {}

impl VerifyOptions {
    /// What `--expect-head HEX` (64 hex digits) and `--pubkey FILE` (as `percentes keygen`
    /// writes `PREFIX.pub`) state, for every command that takes them.
    pub fn from_flags(
        expect_head: Option<&str>,
        pubkey: Option<&std::path::Path>,
    ) -> Result<VerifyOptions, TrustError> {
        let expect_head = expect_head
            .map(|h| super::parse_hash(h).ok_or_else(|| TrustError::Head { text: h.to_owned() }))
            .transpose()?;
        let trusted_key = pubkey
            .map(super::keys::read_public_key)
            .transpose()
            .map_err(TrustError::Key)?;
        Ok(VerifyOptions {
            expect_head,
            trusted_key,
        })
    }
}

/// Where and how verification failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The record sequence number where the damage starts (the first record of the bad block).
    pub record_index: Option<u64>,
    /// Where in the file, bytes from its start.
    pub byte_offset: u64,
    /// What is wrong there.
    pub what: String,
    /// What the verifier expected, when one value was expected.
    pub expected: Option<String>,
    /// What it found instead.
    pub found: Option<String>,
}

/// The last verified checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointSeen {
    /// The checkpoint's sequence number (0, 1, 2, ...).
    pub sequence: u64,
    /// When it was written, ns from the epoch.
    pub at_ns: u64,
    /// Records before its block.
    pub records_before: u64,
    /// The chain value after the checkpoint's block.
    #[serde(serialize_with = "as_hex")]
    pub chain_head: [u8; 32],
}

/// The verified seal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SealSeen {
    /// `completed`, `aborted` or `escaped`.
    pub status: &'static str,
    /// Why the run ended so.
    pub reason: String,
    /// When the seal was written, ns from the epoch.
    pub at_ns: u64,
}

/// How a trusted head given with `--expect-head` was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "match")]
pub enum HeadMatch {
    /// It is the final chain head: everything in the file is covered.
    Final,
    /// It is the chain value after `records` records: that prefix is covered, the rest is not.
    Prefix {
        /// Records the trusted head covers.
        records: u64,
    },
    /// The chain never passes through it.
    NotFound,
}

/// Signatures seen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Signatures {
    /// The key the header names.
    #[serde(serialize_with = "as_hex_opt")]
    pub key: Option<[u8; 32]>,
    /// Signatures that verified against the key.
    pub valid: u64,
    /// Whether the header's key is the trusted key given in the options.
    pub trusted: bool,
}

/// Everything `percentes verify` reports.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyReport {
    /// The verdict: one of five, a pure function of the bytes.
    pub verdict: Verdict,
    /// The file's length, bytes.
    pub file_bytes: u64,
    /// Bytes from the start through the last verified block.
    pub verified_bytes: u64,
    /// Blocks framed.
    pub blocks: u64,
    /// Records in verified blocks (the seal included).
    pub records: u64,
    /// Requests by outcome, and the other records, as counted while reading.
    pub counts: Counts,
    /// The last checkpoint read, if any.
    pub last_checkpoint: Option<CheckpointSeen>,
    /// The seal, if the journal is sealed.
    pub seal: Option<SealSeen>,
    /// The chain value after the last verified block: for a sealed journal, its root hash.
    #[serde(serialize_with = "as_hex_opt")]
    pub chain_head: Option<[u8; 32]>,
    /// How a trusted head given in the options matched the chain, when one was given.
    pub head_match: Option<HeadMatch>,
    /// The signatures seen.
    pub signatures: Signatures,
    /// Why the verdict is not `sealed-intact`.
    pub problem: Option<Problem>,
    #[serde(skip)]
    /// The decoded header, when it decoded.
    pub header: Option<Header>,
}

impl VerifyReport {
    /// `verify --json`: the report, with its verdict's name and the file it is of.
    pub fn json(&self, path: &std::path::Path) -> serde_json::Value {
        let mut value = serde_json::to_value(self).expect("a report serializes");
        value["verdict"] = self.verdict.name().into();
        value["journal"] = path.display().to_string().into();
        value
    }

    fn new(file_bytes: usize) -> VerifyReport {
        VerifyReport {
            verdict: Verdict::NotAJournal,
            file_bytes: file_bytes as u64,
            verified_bytes: 0,
            blocks: 0,
            records: 0,
            counts: Counts::default(),
            last_checkpoint: None,
            seal: None,
            chain_head: None,
            head_match: None,
            signatures: Signatures::default(),
            problem: None,
            header: None,
        }
    }

    fn fail(mut self, verdict: Verdict, problem: Problem) -> VerifyReport {
        self.verdict = verdict;
        self.problem = Some(problem);
        self
    }

    /// Whether this verdict lets `verify` exit 0: sealed-intact, and a trusted head, when one was
    /// given, vouches for the whole file (a head that covers only a prefix leaves the records
    /// after it unvouched for, so it does not).
    pub fn ok(&self) -> bool {
        self.verdict == Verdict::SealedIntact
            && !matches!(self.head_match, Some(HeadMatch::Prefix { .. }))
    }
}

/// Verifies `bytes` as a journal.
pub fn verify(bytes: &[u8], options: &VerifyOptions) -> VerifyReport {
    verify_with_progress(bytes, options, &mut |_| {})
}

/// As [`verify`], calling `progress(offset)` after each verified block with the offset verified so far.
pub fn verify_with_progress(
    bytes: &[u8],
    options: &VerifyOptions,
    progress: &mut dyn FnMut(u64),
) -> VerifyReport {
    let mut report = VerifyReport::new(bytes.len());
    let (header_end, chain0, signing_key) = match verify_header(bytes, options, &mut report) {
        Ok(verified) => verified,
        Err((verdict, problem)) => return report.fail(verdict, problem),
    };

    let mut chain = chain0;
    let heads_seen_at = |records: u64, head: &[u8; 32], report: &mut VerifyReport| {
        if options.expect_head.as_ref() == Some(head) {
            report.head_match = Some(HeadMatch::Prefix { records });
        }
    };
    heads_seen_at(0, &chain, &mut report);
    let mut pos = header_end;
    report.verified_bytes = pos as u64;
    report.chain_head = Some(chain);
    let mut next_record: u64 = 0;
    let mut sealed = false;

    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < BLOCK_PREFIX_BYTES {
            let shown = rest.len().min(BLOCK_MAGIC.len());
            let verdict = if rest[..shown] == BLOCK_MAGIC[..shown] {
                Verdict::UnsealedPrefix
            } else {
                Verdict::Tampered
            };
            return finish_unsealed(
                report,
                verdict,
                problem(
                    Some(next_record),
                    pos,
                    format!("{} bytes of a block prefix, then the file ends", rest.len()),
                ),
                options,
            );
        }
        if rest[0..4] != BLOCK_MAGIC {
            let mut p = problem(Some(next_record), pos, "block magic missing".into());
            p.expected = Some(hex(&BLOCK_MAGIC));
            p.found = Some(hex(&rest[0..4]));
            return report.fail(Verdict::Tampered, p);
        }
        let payload_len = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        let check = u32::from_le_bytes(rest[8..12].try_into().expect("4 bytes"));
        let count = u32::from_le_bytes(rest[12..16].try_into().expect("4 bytes"));
        let first = u64::from_le_bytes(rest[16..24].try_into().expect("8 bytes"));
        if check != !payload_len {
            return report.fail(
                Verdict::Tampered,
                problem(
                    Some(next_record),
                    pos + 4,
                    format!("block payload length {payload_len} is damaged (its complement reads {check:#010x})"),
                ),
            );
        }
        if payload_len > BLOCK_PAYLOAD_BYTES_MAX {
            // Consistent with its complement, and still larger than any block a writer makes.
            return report.fail(
                Verdict::Tampered,
                problem(
                    Some(next_record),
                    pos + 4,
                    format!(
                        "block payload length {payload_len} is over the {BLOCK_PAYLOAD_BYTES_MAX}-byte limit (JOURNAL.md, Blocks)"
                    ),
                ),
            );
        }
        if first != next_record {
            let mut p = problem(
                Some(next_record),
                pos + 16,
                "block out of sequence (a block was removed, repeated, reordered or spliced in)"
                    .into(),
            );
            p.expected = Some(next_record.to_string());
            p.found = Some(first.to_string());
            return report.fail(Verdict::Tampered, p);
        }
        if count == 0 {
            return report.fail(
                Verdict::Tampered,
                problem(Some(next_record), pos + 12, "block holds no record".into()),
            );
        }
        let hashed_end = BLOCK_PREFIX_BYTES + payload_len as usize;
        let block_end = hashed_end + HASH_BYTES;
        if rest.len() < block_end {
            return finish_unsealed(
                report,
                Verdict::UnsealedPrefix,
                problem(
                    Some(next_record),
                    pos,
                    format!(
                        "block of {block_end} bytes is cut off after {} bytes",
                        rest.len()
                    ),
                ),
                options,
            );
        }
        let computed = chain_step(&chain, &rest[..hashed_end]);
        let stored: [u8; 32] = rest[hashed_end..block_end].try_into().expect("32 bytes");
        if computed != stored {
            let mut p = problem(
                Some(next_record),
                pos,
                format!(
                    "chain value of the block holding records {next_record}..{} does not match",
                    next_record + u64::from(count)
                ),
            );
            p.expected = Some(hex(&computed));
            p.found = Some(hex(&stored));
            return report.fail(Verdict::Tampered, p);
        }

        // The block's records: a fast scan for framing and counts, then the control record.
        let payload = &rest[BLOCK_PREFIX_BYTES..hashed_end];
        let scan = match scan_block(payload, count) {
            Ok(scan) => scan,
            Err(ScanError { record, at, what }) => {
                return report.fail(
                    Verdict::Tampered,
                    problem(
                        Some(next_record + u64::from(record)),
                        pos + BLOCK_PREFIX_BYTES + at,
                        what,
                    ),
                )
            }
        };
        let c = &mut report.counts;
        c.completed += scan.outcomes[Outcome::Completed as usize];
        c.errored += scan.outcomes[Outcome::Errored as usize];
        c.censored += scan.outcomes[Outcome::Censored as usize];
        c.undispatched += scan.outcomes[Outcome::Undispatched as usize];
        c.requests += scan.outcomes.iter().sum::<u64>();
        c.events += scan.events;
        c.telemetry += scan.telemetry;
        c.other += scan.other;
        if let Some(control) = scan.control {
            let body = &payload[RECORD_PREFIX_BYTES..RECORD_PREFIX_BYTES + control.len];
            let at = (next_record, pos + BLOCK_PREFIX_BYTES);
            match verify_control(
                &mut report,
                (control.kind, body),
                at,
                (&chain, stored),
                signing_key.as_ref(),
            ) {
                Ok(seal) => sealed = seal,
                Err((verdict, problem)) => return report.fail(verdict, problem),
            }
        }
        chain = stored;
        next_record += u64::from(count);
        pos += block_end;
        report.blocks += 1;
        report.records = next_record;
        report.verified_bytes = pos as u64;
        report.chain_head = Some(chain);
        heads_seen_at(next_record, &chain, &mut report);
        progress(pos as u64);
        if sealed {
            break;
        }
    }

    if sealed && pos != bytes.len() {
        let mut p = problem(
            Some(next_record),
            pos,
            format!("{} bytes after the seal", bytes.len() - pos),
        );
        p.expected = Some("end of file".into());
        return report.fail(Verdict::Tampered, p);
    }
    if !sealed {
        return finish_unsealed(
            report,
            Verdict::UnsealedPrefix,
            problem(
                Some(next_record),
                pos,
                "the file ends after a complete block, before any seal".into(),
            ),
            options,
        );
    }
    report.verdict = Verdict::SealedIntact;
    apply_expected_head(report, options)
}

/// What the fast scan of a block's payload found.
#[derive(Default)]
struct Scan {
    /// Request records by outcome byte (the `Outcome` discriminants).
    outcomes: [u64; 4],
    events: u64,
    telemetry: u64,
    other: u64,
    /// A checkpoint or seal: the only record of its block.
    control: Option<Control>,
}

struct Control {
    kind: u8,
    len: usize,
}

struct ScanError {
    /// Record number within the block.
    record: u32,
    /// Byte offset within the payload.
    at: usize,
    what: String,
}

/// Walks a payload's record frames: lengths must fill it exactly with `count` records, request
/// outcome bytes must be defined, a checkpoint or seal must be alone. Counts as it goes. This is
/// the per-record cost of verification, so it touches only the frame and the outcome byte.
fn scan_block(payload: &[u8], count: u32) -> Result<Scan, ScanError> {
    const REQUEST: u8 = RecordKind::Request as u8;
    const EVENT: u8 = RecordKind::Event as u8;
    const TELEMETRY: u8 = RecordKind::Telemetry as u8;
    const CHECKPOINT: u8 = RecordKind::Checkpoint as u8;
    const SEAL: u8 = RecordKind::Seal as u8;
    let mut scan = Scan::default();
    let mut at = 0usize;
    for record in 0..count {
        let Some(prefix) = payload.get(at..at + RECORD_PREFIX_BYTES) else {
            return Err(ScanError {
                record,
                at,
                what: "record frame cut off inside its block".into(),
            });
        };
        let len = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        let kind = prefix[4];
        let body_at = at + RECORD_PREFIX_BYTES;
        if len > RECORD_BYTES_MAX as usize || payload.len() - body_at < len {
            return Err(ScanError {
                record,
                at,
                what: format!("record length {len} runs past its block"),
            });
        }
        match kind {
            REQUEST => match payload[body_at..body_at + len].get(REQUEST_OUTCOME_OFFSET) {
                Some(&outcome) if (outcome as usize) < scan.outcomes.len() => {
                    scan.outcomes[outcome as usize] += 1
                }
                _ => {
                    return Err(ScanError {
                        record,
                        at,
                        what: "request record with an undefined outcome byte".into(),
                    })
                }
            },
            EVENT => scan.events += 1,
            TELEMETRY => scan.telemetry += 1,
            CHECKPOINT | SEAL => {
                if count != 1 {
                    return Err(ScanError {
                        record,
                        at,
                        what: "a checkpoint or seal shares its block with other records".into(),
                    });
                }
                scan.control = Some(Control { kind, len });
            }
            _ => scan.other += 1,
        }
        at = body_at + len;
    }
    if at != payload.len() {
        return Err(ScanError {
            record: count,
            at,
            what: "bytes after the block's last record".into(),
        });
    }
    Ok(scan)
}

fn finish_unsealed(
    report: VerifyReport,
    verdict: Verdict,
    problem: Problem,
    options: &VerifyOptions,
) -> VerifyReport {
    let report = report.fail(verdict, problem);
    if verdict == Verdict::UnsealedPrefix {
        apply_expected_head(report, options)
    } else {
        report
    }
}

/// A trusted head must lie on the chain; the final head covers the whole file.
fn apply_expected_head(mut report: VerifyReport, options: &VerifyOptions) -> VerifyReport {
    let Some(expected) = options.expect_head else {
        return report;
    };
    if report.chain_head == Some(expected) {
        report.head_match = Some(HeadMatch::Final);
    }
    if report.head_match.is_none() {
        report.head_match = Some(HeadMatch::NotFound);
        let mut p = Problem {
            record_index: None,
            byte_offset: report.verified_bytes,
            what: "the chain never passes through the trusted head: the journal was rewritten, or cut before \
                   the point that head covers"
                .into(),
            expected: Some(hex(&expected)),
            found: report.chain_head.map(|h| hex(&h)),
        };
        if let Some(previous) = report.problem.take() {
            p.what = format!("{}; also: {}", p.what, previous.what);
        }
        report.verdict = Verdict::Tampered;
        report.problem = Some(p);
    }
    report
}

/// The records of verified bytes, in order, with their sequence number and byte offset. Stops at
/// the end of the verified prefix; call it only with `report.verified_bytes` from [`verify`].
pub fn records(bytes: &[u8], header_end: usize, verified_bytes: usize) -> RecordIter<'_> {
    RecordIter {
        bytes: &bytes[..verified_bytes.min(bytes.len())],
        pos: header_end,
        block_left: 0,
        block_end: 0,
        next: 0,
    }
}

/// See [`records`].
#[derive(Debug)]
pub struct RecordIter<'a> {
    bytes: &'a [u8],
    pos: usize,
    block_left: u32,
    block_end: usize,
    next: u64,
}

/// A framed record: where it is, what kind, its body.
#[derive(Clone, Copy, Debug)]
pub struct Framed<'a> {
    /// Its position in the journal's record sequence, from 0.
    pub sequence: u64,
    /// Where its frame starts, bytes from the file's start.
    pub byte_offset: u64,
    /// Its kind byte (JOURNAL.md).
    pub kind: u8,
    /// Its body, in place.
    pub body: &'a [u8],
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Framed<'a>;

    fn next(&mut self) -> Option<Framed<'a>> {
        if self.block_left == 0 {
            if self.block_end != 0 {
                self.pos = self.block_end;
            }
            let prefix = self.bytes.get(self.pos..self.pos + BLOCK_PREFIX_BYTES)?;
            let payload_len = u32::from_le_bytes(prefix[4..8].try_into().ok()?) as usize;
            self.block_left = u32::from_le_bytes(prefix[12..16].try_into().ok()?);
            self.block_end = self.pos + BLOCK_PREFIX_BYTES + payload_len + HASH_BYTES;
            if self.block_end > self.bytes.len() {
                return None;
            }
            self.pos += BLOCK_PREFIX_BYTES;
        }
        let frame = self.bytes.get(self.pos..self.pos + RECORD_PREFIX_BYTES)?;
        let len = u32::from_le_bytes(frame[0..4].try_into().ok()?) as usize;
        let body = self
            .bytes
            .get(self.pos + RECORD_PREFIX_BYTES..self.pos + RECORD_PREFIX_BYTES + len)?;
        let framed = Framed {
            sequence: self.next,
            byte_offset: self.pos as u64,
            kind: frame[4],
            body,
        };
        self.pos += RECORD_PREFIX_BYTES + len;
        self.block_left -= 1;
        self.next += 1;
        Some(framed)
    }
}

fn as_hex<S: Serializer>(bytes: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex(bytes))
}

fn as_hex_opt<S: Serializer>(bytes: &Option<[u8; 32]>, s: S) -> Result<S::Ok, S::Error> {
    match bytes {
        Some(b) => s.serialize_str(&hex(b)),
        None => s.serialize_none(),
    }
}

/// The human rendering of a report (what `percentes verify` prints, less the file path).
pub fn render(report: &VerifyReport) -> String {
    let mut out = format!("verdict: {}\n", report.verdict.name());
    if let Some(h) = &report.header {
        out.push_str(&format!(
            "format: v1, spec {} at capture, {} {} (commit {})\n",
            h.spec_version, "percentes", h.tool_version, h.tool_commit
        ));
        let label = if h.profile == "dev" {
            format!(" (time factor {}; NOT PUBLISHABLE)", h.dev_time_factor)
        } else {
            String::new()
        };
        out.push_str(&format!("profile: {}{label}\n", h.profile));
        out.push_str(&format!("config: blake3 {}\n", hex(&h.config_hash)));
        out.push_str(&format!(
            "schedule: {} requests, digest {}, shard {} of {}\n",
            h.schedule_requests,
            hex(&h.schedule_digest),
            h.shard_index,
            h.shard_count
        ));
    }
    let c = &report.counts;
    out.push_str(&format!(
        "records: {} in {} blocks; requests {} (completed {}, errored {}, censored {}, undispatched {}); \
         events {}; telemetry {}; checkpoints {}; other {}\n",
        report.records,
        report.blocks,
        c.requests,
        c.completed,
        c.errored,
        c.censored,
        c.undispatched,
        c.events,
        c.telemetry,
        c.checkpoints,
        c.other
    ));
    out.push_str(&format!(
        "verified: {} of {} bytes\n",
        report.verified_bytes, report.file_bytes
    ));
    if let Some(cp) = &report.last_checkpoint {
        out.push_str(&format!(
            "last checkpoint: #{} after {} records, head {}\n",
            cp.sequence,
            cp.records_before,
            hex(&cp.chain_head)
        ));
    }
    if let Some(seal) = &report.seal {
        let reason = if seal.reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", seal.reason)
        };
        out.push_str(&format!(
            "seal: {}{reason} at {} ns\n",
            seal.status, seal.at_ns
        ));
    }
    if let Some(key) = &report.signatures.key {
        out.push_str(&format!(
            "signatures: {} valid, key {} ({})\n",
            report.signatures.valid,
            hex(key),
            if report.signatures.trusted {
                "trusted"
            } else {
                "not checked against a trusted key"
            }
        ));
    }
    match &report.head_match {
        Some(HeadMatch::Final) => out.push_str("trusted head: matches the final chain head\n"),
        Some(HeadMatch::Prefix { records }) => out.push_str(&format!(
            "trusted head: covers the first {records} records only; the records after them are not vouched for by it (exit 1). The seal's head, the last line `record --heads` writes, covers the whole file\n"
        )),
        Some(HeadMatch::NotFound) => out.push_str("trusted head: NOT on the chain\n"),
        None => {}
    }
    if let Some(head) = &report.chain_head {
        let name = if report.verdict == Verdict::SealedIntact {
            "chain head (root hash)"
        } else {
            "chain head of the verified prefix"
        };
        out.push_str(&format!("{name}: {}\n", hex(head)));
    }
    if let Some(p) = &report.problem {
        let index = p
            .record_index
            .map(|i| format!("record {i}, "))
            .unwrap_or_default();
        out.push_str(&format!(
            "problem: {index}byte {}: {}\n",
            p.byte_offset, p.what
        ));
        if let Some(e) = &p.expected {
            out.push_str(&format!("  expected: {e}\n"));
        }
        if let Some(f) = &p.found {
            out.push_str(&format!("  found:    {f}\n"));
        }
    }
    out
}
