//! Sharded capture: the partition of one schedule over N recorders, the host facts a shard
//! journals about its clock and its start, and the manifest that binds N shard journals into one
//! run (SPEC §2 "Sharded capture", formats/JOURNAL.md §Manifest).
//!
//! The manifest is JSON for people and tools; what it promises is its **binding**, a BLAKE3 over
//! bytes laid out here (never over the JSON text), optionally signed with the operator's ed25519
//! key. Every other field restates something the shard files say and is checked against them.

use std::fmt;

pub use ed25519_dalek::SigningKey;
use ed25519_dalek::{Signature, Signer, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::header::HostFact;
use super::verify::VerifyReport;
use super::{hex, parse_hash, Header, Verdict};
use crate::config::Config;
use crate::pins;

/// The manifest layout this build writes and reads.
pub const MANIFEST_VERSION: u32 = 1;
/// Prefixes the bytes the binding hashes.
pub const MANIFEST_DOMAIN: &[u8] = b"percentes shard manifest v1\0";
/// Prefixes the binding in the message an operator's key signs.
pub const MANIFEST_SIGNATURE_DOMAIN: &[u8] = b"percentes shard manifest v1 signature\0";
/// Most shards one schedule may be split into.
pub const SHARDS_MAX: u32 = 1024;

/// What a shard flag, an agreed instant or a manifest got wrong (issue 51 item 4): its kind, for
/// a caller or a test to act on, and a sentence that names the input and what to give instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    kind: ManifestErrorKind,
    message: String,
}

/// Which rule an input broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestErrorKind {
    /// `K/N` names no shard (`--shard`, `--shards` with `JOB_COMPLETION_INDEX`).
    Shard,
    /// A shard of several was given no agreed epoch (`--start-at`, SPEC §2 "Sharded capture").
    NoEpoch,
    /// An agreed epoch is not an instant this build reads.
    Instant,
    /// A manifest field that must be 64 hex digits is not.
    Hex,
    /// The text is not a manifest's JSON: syntax, a key missing, twice or unknown, a type.
    Format,
    /// A manifest of a layout this build does not read.
    Version,
    /// The signature is malformed, by another key than the trusted one, or does not verify.
    Signature,
}

impl ManifestError {
    fn new(kind: ManifestErrorKind, message: impl Into<String>) -> ManifestError {
        ManifestError {
            kind,
            message: message.into(),
        }
    }

    /// Which rule was broken.
    pub fn kind(&self) -> ManifestErrorKind {
        self.kind
    }

    /// The same error, its sentence led by `context` (the flag or file it came from).
    fn within(self, context: impl fmt::Display) -> ManifestError {
        ManifestError::new(self.kind, format!("{context}: {}", self.message))
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ManifestError {}

/// Shard `index` of `count`: the journal of the indices `i` with `i mod count == index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// k, from 0.
    pub index: u32,
    /// N, at least 1.
    pub count: u32,
}

impl Shard {
    /// One recorder holding the whole schedule.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Reads `K/N` (k from 0, k < N, N at most [`SHARDS_MAX`]).
    pub fn parse(text: &str) -> Result<Shard, ManifestError> {
        let shard_error = |why: String| ManifestError::new(ManifestErrorKind::Shard, why);
        let (k, n) = text
            .split_once('/')
            .ok_or_else(|| shard_error(format!("shard `{text}` is not K/N (e.g. 0/3)")))?;
        let number = |part: &str, what: &str| {
            part.trim().parse::<u32>().map_err(|_| {
                shard_error(format!(
                    "shard `{text}`: {what} `{part}` is not a whole number"
                ))
            })
        };
        let shard = Shard {
            index: number(k, "K")?,
            count: number(n, "N")?,
        };
        shard.check()?;
        Ok(shard)
    }

    /// Refuses a shard that does not exist.
    pub fn check(self) -> Result<(), ManifestError> {
        if self.count == 0 || self.count > SHARDS_MAX {
            return Err(ManifestError::new(
                ManifestErrorKind::Shard,
                format!(
                    "a schedule is split into 1 to {SHARDS_MAX} shards, not {}",
                    self.count
                ),
            ));
        }
        if self.index >= self.count {
            return Err(ManifestError::new(
                ManifestErrorKind::Shard,
                format!(
                    "shard {} of {} does not exist: K counts from 0 and stays below N",
                    self.index, self.count
                ),
            ));
        }
        Ok(())
    }

    /// Whether schedule index `index` belongs to this shard.
    pub fn holds(self, index: u64) -> bool {
        index % u64::from(self.count) == u64::from(self.index)
    }

    /// How many of a schedule's `total` requests this shard holds.
    pub fn requests_of(self, total: u64) -> u64 {
        let (k, n) = (u64::from(self.index), u64::from(self.count));
        if total > k {
            (total - k - 1) / n + 1
        } else {
            0
        }
    }

    /// The shard `record` was given: `--shard K/N` (`flag`), or `--shards N` (`count`) with K
    /// from `job_index`, a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`; the whole schedule
    /// without either.
    pub fn from_flags(
        flag: Option<&str>,
        count: Option<u32>,
        job_index: Option<&str>,
    ) -> Result<Shard, ManifestError> {
        match (flag, count, job_index) {
            (Some(text), _, _) => Shard::parse(text),
            (None, Some(count), Some(index)) => Shard::parse(&format!("{index}/{count}"))
                .map_err(|e| e.within(format_args!("JOB_COMPLETION_INDEX={index} with --shards {count}"))),
            (None, Some(_), None) => Err(ManifestError::new(ManifestErrorKind::Shard, "--shards N takes the shard index from JOB_COMPLETION_INDEX (a Kubernetes Indexed Job sets it), which is not set; give --shard K/N instead")),
            (None, None, _) => Ok(Shard::WHOLE),
        }
    }

    /// The shard ([`Shard::from_flags`]) and agreed epoch (`--start-at`, ns since the Unix
    /// epoch) a recording was given; a shard of several needs the epoch (SPEC §2 "Sharded
    /// capture").
    pub fn with_epoch(
        flag: Option<&str>,
        count: Option<u32>,
        job_index: Option<&str>,
        start_at: Option<&str>,
    ) -> Result<(Shard, Option<i64>), ManifestError> {
        let shard = Shard::from_flags(flag, count, job_index)?;
        let start_at = start_at
            .map(|t| parse_instant(t).map_err(|e| e.within("--start-at")))
            .transpose()?;
        if shard.count > 1 && start_at.is_none() {
            return Err(ManifestError::new(ManifestErrorKind::NoEpoch, format!("shard {shard} needs --start-at TIME: every shard of one schedule starts at one agreed instant (SPEC §2 \"Sharded capture\"), e.g. --start-at $(date -u -d '+2 min' +%s)")));
        }
        Ok((shard, start_at))
    }

    /// The shard a header declares.
    pub fn of(header: &Header) -> Shard {
        Shard {
            index: header.shard_index,
            count: header.shard_count,
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Reads an agreed epoch: Unix seconds (`1796161200`, fractions allowed) or an RFC 3339 instant
/// (`2026-12-01T21:40:00Z`, `2026-12-01T22:40:00.5+01:00`). Returns ns since the Unix epoch;
/// an instant before 1970 or past what i64 ns hold (the year 2262) is refused.
pub fn parse_instant(text: &str) -> Result<i64, ManifestError> {
    let text = text.trim();
    let bad = |why: &str| {
        ManifestError::new(ManifestErrorKind::Instant, format!("`{text}` is not an instant: {why} (give Unix seconds, or RFC 3339 such as 2026-12-01T21:40:00Z)"))
    };
    let number = |part: Option<&str>, what: &str| -> Result<i64, ManifestError> {
        part.filter(|p| !p.is_empty() && p.len() <= 18 && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<i64>().ok())
            .ok_or_else(|| bad(&format!("no {what}")))
    };
    // Nanoseconds of a decimal fraction's digits (exact; digits past the ninth are dropped).
    let fraction_ns = |digits: &str| -> Result<i64, ManifestError> {
        if digits.is_empty() {
            return Ok(0);
        }
        let nine: String = digits
            .chars()
            .chain(std::iter::repeat('0'))
            .take(9)
            .collect();
        number(Some(&nine), "fraction of a second")
            .and_then(|ns| number(Some(digits), "fraction of a second").map(|_| ns))
    };
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        // Unix seconds, read exactly (an f64 cannot hold ns since 1970).
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let seconds = number(Some(whole), "Unix seconds")?;
        return in_range(seconds, fraction_ns(fraction)?).ok_or_else(|| bad("out of range"));
    }
    let (date, time) = text
        .split_once(['T', 't', ' '])
        .ok_or_else(|| bad("no `T` between date and time"))?;
    let mut d = date.split('-');
    let (year, month, day) = (
        number(d.next(), "year")?,
        number(d.next(), "month")?,
        number(d.next(), "day")?,
    );
    if d.next().is_some()
        || !(1970..=9999).contains(&year)
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
    {
        return Err(bad("the date is not YYYY-MM-DD"));
    }
    let (clock, offset_s) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = time
            .rfind(['+', '-'])
            .ok_or_else(|| bad("no time zone (Z or +HH:MM)"))?;
        let (clock, zone) = time.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..]
            .split_once(':')
            .ok_or_else(|| bad("the zone is not +HH:MM"))?;
        let (h, m) = (
            number(Some(h), "zone hours")?,
            number(Some(m), "zone minutes")?,
        );
        if h > 23 || m > 59 {
            return Err(bad("the zone is out of range"));
        }
        (clock, sign * (h * 3600 + m * 60))
    };
    let (whole, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut t = whole.split(':');
    let (h, m, sec) = (
        number(t.next(), "hour")?,
        number(t.next(), "minute")?,
        number(t.next(), "second")?,
    );
    if t.next().is_some() || h > 23 || m > 59 || sec > 60 {
        return Err(bad("the time is not HH:MM:SS"));
    }
    let fraction_ns = fraction_ns(fraction)?;
    // Days from 1970-01-01 to the civil date (proleptic Gregorian).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + h * 3600 + m * 60 + sec - offset_s;
    in_range(seconds, fraction_ns).ok_or_else(|| bad("out of range"))
}

/// Seconds and ns as ns since the Unix epoch, when that is from 1970 to the year 2262 (i64 ns).
fn in_range(seconds: i64, fraction_ns: i64) -> Option<i64> {
    seconds
        .checked_mul(1_000_000_000)?
        .checked_add(fraction_ns)
        .filter(|ns| *ns >= 0)
}

/// A Unix time in ns as an RFC 3339 UTC instant to the nanosecond (civil-from-days, proleptic
/// Gregorian); [`parse_instant`] reads it back.
pub fn format_instant(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let nanos = unix_ns.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        nanos
    )
}

/// One shard as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestShard {
    /// k.
    pub index: u32,
    /// The shard journal's path, relative to the manifest's folder.
    pub file: String,
    /// Its length in bytes.
    pub file_bytes: u64,
    /// Its chain head (the seal's root hash), hex.
    pub chain_head: String,
    /// Its seal status: `completed`, `aborted` or `escaped`.
    pub seal: String,
    /// Its request records.
    pub requests: u64,
    /// The host that recorded it.
    pub hostname: String,
    /// The host's boot id, when journaled.
    pub boot_id: String,
    /// Its clock as journaled: discipline and error bound.
    pub clock: String,
    /// How late it was ready, ms (0 when on time).
    pub start_late_ms: f64,
}

/// An operator's signature over the binding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestSignature {
    /// The ed25519 public key, hex.
    pub public_key: String,
    /// ed25519 over [`MANIFEST_SIGNATURE_DOMAIN`] followed by the binding's 32 raw bytes (the
    /// hash, not its input), hex.
    pub signature: String,
}

/// N shard journals bound into one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub manifest_version: u32,
    /// The configuration every shard recorded, BLAKE3 hex.
    pub config_hash: String,
    /// The schedule every shard shares (§J.4), hex.
    pub schedule_digest: String,
    /// Requests in the whole schedule.
    pub schedule_requests: u64,
    /// N.
    pub shard_count: u32,
    /// The agreed epoch, ns since the Unix epoch.
    pub epoch_realtime_ns: i64,
    /// Every shard, by index.
    pub shards: Vec<ManifestShard>,
    /// BLAKE3 of [`Manifest::binding_bytes`], hex: what the manifest promises.
    pub binding: String,
    /// The operator's signature over the binding, when a key was given. The key is always
    /// written, `null` when unsigned: a manifest without it does not parse.
    #[serde(deserialize_with = "written")]
    pub signature: Option<ManifestSignature>,
}

/// A key that must be present, though its value may be `null` (serde reads a missing `Option`
/// as `None` unless the field is read by a function of its own, as here).
fn written<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ManifestSignature>, D::Error> {
    Option::deserialize(d)
}

/// What a manifest or a set of shards fails, one reason each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused(pub Vec<String>);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, why) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "- {why}")?;
        }
        Ok(())
    }
}

impl Manifest {
    /// The bytes the binding hashes: the domain, the config hash, the schedule digest, the
    /// schedule's size and N, the epoch, then per shard in index order its index, file length and
    /// chain head (little-endian integers, raw 32-byte hashes; JOURNAL.md §Manifest).
    pub fn binding_bytes(&self) -> Result<Vec<u8>, ManifestError> {
        let hash = |text: &str, what: &str| {
            parse_hash(text).ok_or_else(|| {
                ManifestError::new(
                    ManifestErrorKind::Hex,
                    format!("{what} `{text}` is not 64 hex digits"),
                )
            })
        };
        let mut bytes = MANIFEST_DOMAIN.to_vec();
        bytes.extend_from_slice(&hash(&self.config_hash, "config_hash")?);
        bytes.extend_from_slice(&hash(&self.schedule_digest, "schedule_digest")?);
        bytes.extend_from_slice(&self.schedule_requests.to_le_bytes());
        bytes.extend_from_slice(&self.shard_count.to_le_bytes());
        bytes.extend_from_slice(&self.epoch_realtime_ns.to_le_bytes());
        for shard in &self.shards {
            bytes.extend_from_slice(&shard.index.to_le_bytes());
            bytes.extend_from_slice(&shard.file_bytes.to_le_bytes());
            bytes.extend_from_slice(&hash(
                &shard.chain_head,
                &format!("shard {} chain_head", shard.index),
            )?);
        }
        Ok(bytes)
    }

    /// The binding: BLAKE3 of the binding input ([`Manifest::binding_bytes`]).
    pub fn compute_binding(&self) -> Result<[u8; 32], ManifestError> {
        Ok(*blake3::hash(&self.binding_bytes()?).as_bytes())
    }

    /// Sets the binding and, with a key, the signature.
    pub fn seal(&mut self, key: Option<&SigningKey>) -> Result<(), ManifestError> {
        let binding = self.compute_binding()?;
        self.binding = hex(&binding);
        self.signature = key.map(|key| ManifestSignature {
            public_key: hex(&key.verifying_key().to_bytes()),
            signature: hex(&key.sign(&signed_message(&binding)).to_bytes()),
        });
        Ok(())
    }

    /// Reads a manifest's JSON text.
    pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let manifest: Manifest = serde_json::from_str(text).map_err(|e| {
            ManifestError::new(
                ManifestErrorKind::Format,
                format!("not a shard manifest: {e}"),
            )
        })?;
        if manifest.manifest_version != MANIFEST_VERSION {
            return Err(ManifestError::new(
                ManifestErrorKind::Version,
                format!(
                    "manifest version {}; this build reads version {MANIFEST_VERSION}",
                    manifest.manifest_version
                ),
            ));
        }
        Ok(manifest)
    }

    /// The manifest's JSON text (pretty, keys in declaration order, a final newline).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a manifest serializes");
        text.push('\n');
        text
    }

    /// Checks the manifest against itself: the binding recomputes, the shards are listed once
    /// each in index order, and a signature (required when `trusted` is given) verifies, by the
    /// trusted key when one is given.
    pub fn check_binding(&self, trusted: Option<[u8; 32]>) -> Result<(), Refused> {
        let mut why = Vec::new();
        // Hex is lowercase, as merge writes it, in every field: one rule for all, so a field
        // compared as text and one parsed as bytes cannot disagree about "ABC" and "abc".
        let mut hex_fields = vec![
            ("config_hash", self.config_hash.as_str(), 64),
            ("schedule_digest", self.schedule_digest.as_str(), 64),
            ("binding", self.binding.as_str(), 64),
        ];
        for shard in &self.shards {
            hex_fields.push(("chain_head", shard.chain_head.as_str(), 64));
        }
        if let Some(s) = &self.signature {
            hex_fields.push(("signature.public_key", s.public_key.as_str(), 64));
            hex_fields.push(("signature.signature", s.signature.as_str(), 128));
        }
        for (field, text, digits) in hex_fields {
            let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
            if text.len() != digits || !text.bytes().all(lower_hex) {
                why.push(format!(
                    "the manifest's {field} `{text}` is not {digits} lowercase hex digits"
                ));
            }
        }
        if !why.is_empty() {
            return Err(Refused(why));
        }
        let listed: Vec<u32> = self.shards.iter().map(|s| s.index).collect();
        let expected: Vec<u32> = (0..self.shard_count).collect();
        if listed != expected {
            why.push(format!(
                "the manifest lists shards {listed:?}; a manifest of {} shards lists {expected:?}, once each, in order",
                self.shard_count
            ));
        }
        match self.compute_binding() {
            Ok(binding) if hex(&binding) == self.binding => {
                match (&self.signature, trusted) {
                    (None, Some(_)) => why.push(
                        "the manifest is not signed, and a public key was given: it must be".into(),
                    ),
                    (None, None) => {}
                    (Some(signature), trusted) => {
                        if let Err(e) = check_signature(signature, &binding, trusted) {
                            why.push(e.to_string());
                        }
                    }
                }
            }
            Ok(binding) => why.push(format!(
                "the manifest's fields bind to {}, but it records binding {}: it was edited after merge",
                hex(&binding),
                self.binding
            )),
            Err(e) => why.push(e.to_string()),
        }
        if why.is_empty() {
            Ok(())
        } else {
            Err(Refused(why))
        }
    }
}

fn signed_message(binding: &[u8; 32]) -> Vec<u8> {
    let mut message = MANIFEST_SIGNATURE_DOMAIN.to_vec();
    message.extend_from_slice(binding);
    message
}

fn check_signature(
    signature: &ManifestSignature,
    binding: &[u8; 32],
    trusted: Option<[u8; 32]>,
) -> Result<(), ManifestError> {
    let refused = |why: String| ManifestError::new(ManifestErrorKind::Signature, why);
    let key = parse_hash(&signature.public_key)
        .ok_or_else(|| refused("the manifest's public_key is not 64 hex digits".into()))?;
    if let Some(trusted) = trusted {
        if trusted != key {
            return Err(refused(format!(
                "the manifest is signed by key {}, not by the trusted key {}",
                signature.public_key,
                hex(&trusted)
            )));
        }
    }
    let bytes: Vec<u8> = (0..signature.signature.len() / 2)
        .filter_map(|i| u8::from_str_radix(signature.signature.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    let bytes: [u8; 64] = bytes
        .try_into()
        .map_err(|_| refused("the manifest's signature is not 128 hex digits".into()))?;
    let key = VerifyingKey::from_bytes(&key)
        .map_err(|_| refused("the manifest's public_key is not an ed25519 key".into()))?;
    key.verify(&signed_message(binding), &Signature::from_bytes(&bytes))
        .map_err(|_| refused("the manifest's signature does not verify over its binding".into()))
}

/// One shard file as merge and verify see it.
#[derive(Clone, Copy, Debug)]
pub struct ShardFile<'a> {
    /// How to name it in an error (its path).
    pub name: &'a str,
    /// Its verification report (the header in it).
    pub report: &'a VerifyReport,
}

/// The value of host fact `fact`, empty when the header has none.
pub fn fact(header: &Header, fact: HostFact) -> &str {
    header.fact(fact).unwrap_or_default()
}

/// The cross-shard rules (SPEC §2 "Sharded capture"): every file sealed-intact with its own header,
/// one configuration, one schedule and one epoch, each shard index exactly once and every shard
/// present, each shard's request count its share of the schedule, starts within
/// `shards.start_late_max_ms`, and clocks either one host's or each bounded by
/// `shards.clock_error_max_ms`. Returns every reason, not the first; on success, the manifest
/// (unsealed: [`Manifest::seal`] binds it).
pub fn check_shards(files: &[ShardFile<'_>]) -> Result<Manifest, Refused> {
    let mut why = Vec::new();
    let mut headers = Vec::new();
    for file in files {
        if file.report.verdict != Verdict::SealedIntact {
            let problem = file
                .report
                .problem
                .as_ref()
                .map(|p| format!(": {} (byte offset {})", p.what, p.byte_offset))
                .unwrap_or_default();
            why.push(format!(
                "{}: verdict {}{problem}; every shard must be sealed-intact",
                file.name,
                file.report.verdict.name()
            ));
        }
        if let Some(header) = &file.report.header {
            headers.push((file, header));
        }
    }
    let Some(&(first_file, first)) = headers.first() else {
        why.push("no shard journal has a readable header".into());
        return Err(Refused(why));
    };
    let config = Config::parse(&first.config_bytes);
    let pin_ns = |pin: &pins::Pin| {
        let ms = config
            .as_ref()
            .map_or(pin.value.as_f64(), |c| c.number(pin));
        (ms * 1e6) as u64
    };
    let (late_max_ns, clock_max_ns) = (
        pin_ns(&pins::SHARDS_START_LATE_MAX_MS),
        pin_ns(&pins::SHARDS_CLOCK_ERROR_MAX_MS),
    );
    let count = first.shard_count;
    let mut seen: Vec<Vec<&str>> = vec![Vec::new(); count.min(SHARDS_MAX) as usize];
    let boot = fact(first, HostFact::BootId);
    let one_clock = !boot.is_empty()
        && headers
            .iter()
            .all(|(_, h)| fact(h, HostFact::BootId) == boot);
    for &(file, header) in &headers {
        let name = file.name;
        let same = |what: &str, a: String, b: String| {
            (a != b).then(|| {
                format!(
                    "{name} is foreign: its {what} is {a}, {} has {b}; every shard records one configuration and one schedule",
                    first_file.name
                )
            })
        };
        why.extend(same(
            "config hash",
            hex(&header.config_hash),
            hex(&first.config_hash),
        ));
        why.extend(same(
            "schedule digest",
            hex(&header.schedule_digest),
            hex(&first.schedule_digest),
        ));
        why.extend(same(
            "shard count",
            header.shard_count.to_string(),
            first.shard_count.to_string(),
        ));
        why.extend(same(
            "epoch (--start-at)",
            header.clock.realtime_epoch_ns.to_string(),
            first.clock.realtime_epoch_ns.to_string(),
        ));
        let shard = Shard::of(header);
        if let Err(e) = shard.check() {
            why.push(format!("{name}: {e}"));
            continue;
        }
        if shard.count == count {
            seen[shard.index as usize].push(name);
        }
        let expected = shard.requests_of(header.schedule_requests);
        let sealed_completed = file
            .report
            .seal
            .as_ref()
            .is_some_and(|s| s.status == "completed");
        if sealed_completed && file.report.counts.requests != expected {
            why.push(format!(
                "{name}: shard {shard} holds {} request records; its share of the {} scheduled is {expected}",
                file.report.counts.requests, header.schedule_requests
            ));
        }
        let late = fact(header, HostFact::StartLateNs)
            .parse::<u64>()
            .unwrap_or_else(|_| {
                why.push(format!(
                    "{name}: it has no {} fact, so its start cannot be checked against shards.start_late_max_ms (§2); a shard recorder journals it",
                    HostFact::StartLateNs.key()
                ));
                0
            });
        if late > late_max_ns {
            why.push(format!(
                "{name}: it was ready {:.1} ms after the agreed epoch; shards.start_late_max_ms is {} (§2)",
                late as f64 / 1e6,
                late_max_ns as f64 / 1e6
            ));
        }
        if !one_clock {
            let sync = fact(header, HostFact::ClockSync);
            let maxerror_ns = fact(header, HostFact::ClockMaxerrorUs)
                .parse::<u64>()
                .map(|us| us.saturating_mul(1000));
            match maxerror_ns {
                _ if !sync.starts_with("synchronized") => why.push(format!(
                    "{name}: its host's clock is {} ({}), and the shards are on more than one host: their timestamps cannot be aligned. Synchronize the hosts' clocks (chrony or ntpd) and record again",
                    if sync.is_empty() { "of unknown discipline" } else { "not synchronized" },
                    if sync.is_empty() { "no clock-sync fact" } else { sync }
                )),
                Ok(ns) if ns > clock_max_ns => why.push(format!(
                    "{name}: its host's clock error bound is {:.1} ms; shards.clock_error_max_ms is {} (§2)",
                    ns as f64 / 1e6,
                    clock_max_ns as f64 / 1e6
                )),
                Ok(_) => {}
                Err(_) => why.push(format!("{name}: it journals no clock error bound")),
            }
        }
    }
    for (k, names) in seen.iter().enumerate() {
        match names.len() {
            0 => why.push(format!(
                "shard {k}/{count} is missing: its indices (i mod {count} = {k}) were never recorded or not given"
            )),
            1 => {}
            _ => why.push(format!(
                "shard {k}/{count} is given more than once ({}): each index must be recorded exactly once",
                names.join(", ")
            )),
        }
    }
    if !why.is_empty() {
        return Err(Refused(why));
    }
    let mut shards: Vec<ManifestShard> = headers
        .iter()
        .map(|(file, header)| ManifestShard {
            index: header.shard_index,
            file: file.name.to_owned(),
            file_bytes: file.report.file_bytes,
            chain_head: file.report.chain_head.map(|h| hex(&h)).unwrap_or_default(),
            seal: file
                .report
                .seal
                .as_ref()
                .map_or("none".into(), |s| s.status.to_owned()),
            requests: file.report.counts.requests,
            hostname: fact(header, HostFact::Hostname).to_owned(),
            boot_id: fact(header, HostFact::BootId).to_owned(),
            clock: format!(
                "{}; maxerror {} us",
                fact(header, HostFact::ClockSync),
                fact(header, HostFact::ClockMaxerrorUs)
            ),
            start_late_ms: fact(header, HostFact::StartLateNs)
                .parse::<u64>()
                .map_or(0.0, |ns| ns as f64 / 1e6),
        })
        .collect();
    shards.sort_by_key(|s| s.index);
    Ok(Manifest {
        manifest_version: MANIFEST_VERSION,
        config_hash: hex(&first.config_hash),
        schedule_digest: hex(&first.schedule_digest),
        schedule_requests: first.schedule_requests,
        shard_count: count,
        epoch_realtime_ns: first.clock.realtime_epoch_ns,
        shards,
        binding: String::new(),
        signature: None,
    })
}

/// Checks a manifest against the shard files it names (already verified, in manifest order:
/// `files[i]` is the file `manifest.shards[i]` names): the cross-shard rules hold, and every
/// named file is the one the manifest bound for its entry (that shard's index, head and length;
/// a file swapped with another shard's, or renamed, is refused by its name), with the
/// manifest's other fields as the files say.
pub fn check_manifest(manifest: &Manifest, files: &[ShardFile<'_>]) -> Result<(), Refused> {
    if files.len() != manifest.shards.len() {
        return Err(Refused(vec![format!(
            "the manifest names {} shard files and {} were read",
            manifest.shards.len(),
            files.len()
        )]));
    }
    let fresh = check_shards(files)?;
    let mut why = Vec::new();
    let fields = |m: &Manifest| {
        (
            m.config_hash.clone(),
            m.schedule_digest.clone(),
            m.schedule_requests,
            m.shard_count,
            m.epoch_realtime_ns,
        )
    };
    if fields(&fresh) != fields(manifest) {
        why.push(
            "the manifest's configuration, schedule, shard count or epoch is not what its shard files say"
                .into(),
        );
    }
    for (listed, file) in manifest.shards.iter().zip(files) {
        // The file the entry names, not the shard of that index wherever it is.
        match fresh.shards.iter().find(|s| s.file == file.name) {
            Some(found) => why.extend(entry_problem(listed, found)),
            None => why.push(format!(
                "shard {}: {} has no readable header",
                listed.index, listed.file
            )),
        }
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(Refused(why))
    }
}

/// What the file a manifest entry names (`found`, as `check_shards` read it) says against the
/// entry (`listed`): another shard's index, another head or length, or another restated field.
fn entry_problem(listed: &ManifestShard, found: &ManifestShard) -> Option<String> {
    if found.index != listed.index {
        return Some(format!(
            "shard {}: the manifest names {} for it, and that file holds shard {}: the files were swapped or renamed after merge",
            listed.index, listed.file, found.index
        ));
    }
    if found.chain_head != listed.chain_head {
        return Some(format!(
            "shard {}: {} has chain head {}, the manifest bound {}: the file was replaced or changed after merge",
            listed.index, found.file, found.chain_head, listed.chain_head
        ));
    }
    if found.file_bytes != listed.file_bytes {
        return Some(format!(
            "shard {}: {} is {} bytes, the manifest bound {}",
            listed.index, found.file, found.file_bytes, listed.file_bytes
        ));
    }
    if (found.seal.as_str(), found.requests) != (listed.seal.as_str(), listed.requests) {
        return Some(format!(
            "shard {}: the manifest says seal {} with {} requests, the file says {} with {}",
            listed.index, listed.seal, listed.requests, found.seal, found.requests
        ));
    }
    // Every other restated field, as the file says it.
    let restated = |s: &ManifestShard| (s.hostname.clone(), s.boot_id.clone(), s.clock.clone());
    if restated(found) != restated(listed)
        || found.start_late_ms.to_bits() != listed.start_late_ms.to_bits()
    {
        return Some(format!(
            "shard {}: the manifest restates host {:?}, boot id {:?}, clock {:?}, {} ms late; the file says {:?}, {:?}, {:?}, {} ms",
            listed.index,
            listed.hostname,
            listed.boot_id,
            listed.clock,
            listed.start_late_ms,
            found.hostname,
            found.boot_id,
            found.clock,
            found.start_late_ms
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_gives_each_index_to_one_shard_and_counts_each_share() {
        for total in [0u64, 1, 2, 7, 100, 101] {
            for n in 1..=5u32 {
                let mut seen = vec![0u32; total as usize];
                let mut sum = 0;
                for k in 0..n {
                    let shard = Shard { index: k, count: n };
                    let held: Vec<u64> = (0..total).filter(|&i| shard.holds(i)).collect();
                    assert_eq!(
                        held.len() as u64,
                        shard.requests_of(total),
                        "{k}/{n} of {total}"
                    );
                    sum += held.len() as u64;
                    for i in held {
                        seen[i as usize] += 1;
                    }
                }
                assert_eq!(sum, total);
                assert!(seen.iter().all(|&c| c == 1));
            }
        }
    }

    #[test]
    fn instants_read_as_unix_seconds_or_rfc_3339() {
        // `date -u -d 2026-12-01T21:40:00Z +%s` prints 1796161200.
        assert_eq!(parse_instant("1796161200"), Ok(1_796_161_200_000_000_000));
        assert_eq!(
            parse_instant("2026-12-01T21:40:00Z"),
            Ok(1_796_161_200_000_000_000)
        );
        assert_eq!(
            parse_instant("2026-12-01T22:40:00.25+01:00"),
            Ok(1_796_161_200_250_000_000)
        );
        assert_eq!(parse_instant("1970-01-01T00:00:00Z"), Ok(0));
        // Past what i64 ns can hold, or before 1970: refused, never an overflow.
        for far in [
            "9999999999",
            "999999999999999999",
            "9999-12-31T23:59:59Z",
            "1969-12-31T23:59:59Z",
            "1970-01-01T00:00:00+01:00",
        ] {
            assert_eq!(
                parse_instant(far).unwrap_err().kind(),
                ManifestErrorKind::Instant,
                "{far}"
            );
        }
        // 2024-02-29 is a leap day: `date -u -d 2024-02-29T12:00:00Z +%s` prints 1709208000.
        assert_eq!(
            parse_instant("2024-02-29T12:00:00-00:00"),
            Ok(1_709_208_000_000_000_000)
        );
        assert_eq!(parse_instant("1796161200.5"), Ok(1_796_161_200_500_000_000));
        // Exact to the nanosecond (an f64 would round this one).
        assert_eq!(
            parse_instant("1796159450.215"),
            Ok(1_796_159_450_215_000_000)
        );
        assert_eq!(
            parse_instant("1796159450.123456789"),
            Ok(1_796_159_450_123_456_789)
        );
        for bad in [
            "",
            "tomorrow",
            "2026-12-01",
            "2026-13-01T00:00:00Z",
            "2026-12-01T21:40:00",
            "-5",
            "2026-12-01T21:40Z",
        ] {
            assert_eq!(
                parse_instant(bad).unwrap_err().kind(),
                ManifestErrorKind::Instant,
                "{bad}"
            );
        }
    }

    #[test]
    fn instants_print_as_rfc_3339_and_read_back() {
        assert_eq!(format_instant(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            format_instant(951_782_400_000_000_001),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(format_instant(-1), "1969-12-31T23:59:59.999999999Z");
        for ns in [0, 951_782_400_000_000_001, 1_796_159_450_123_456_789] {
            assert_eq!(parse_instant(&format_instant(ns)), Ok(ns));
        }
    }

    #[test]
    fn a_shard_must_exist() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
        for bad in ["3/3", "0/0", "1", "a/3", "1/2000", "-1/3"] {
            assert_eq!(
                Shard::parse(bad).unwrap_err().kind(),
                ManifestErrorKind::Shard,
                "{bad}"
            );
        }
        assert_eq!(Shard::WHOLE.to_string(), "0/1");
        let three = |k| Ok(Shard { index: k, count: 3 });
        assert_eq!(Shard::from_flags(Some("1/3"), None, Some("2")), three(1));
        assert_eq!(Shard::from_flags(None, Some(3), Some("2")), three(2));
        assert!(Shard::from_flags(None, Some(3), None)
            .unwrap_err()
            .to_string()
            .contains("JOB_COMPLETION_INDEX"));
        assert_eq!(
            Shard::from_flags(None, Some(3), Some("3"))
                .unwrap_err()
                .kind(),
            ManifestErrorKind::Shard
        );
        assert_eq!(Shard::from_flags(None, None, Some("2")), Ok(Shard::WHOLE));
        // A shard of several needs the agreed epoch; a bad one says which flag it came from.
        let kind = |start_at| {
            Shard::with_epoch(Some("1/3"), None, None, start_at)
                .unwrap_err()
                .kind()
        };
        assert_eq!(kind(None), ManifestErrorKind::NoEpoch);
        assert_eq!(kind(Some("tomorrow")), ManifestErrorKind::Instant);
        let e = Shard::with_epoch(Some("1/3"), None, None, Some("tomorrow")).unwrap_err();
        assert!(e.to_string().starts_with("--start-at: "), "{e}");
        assert_eq!(
            Shard::with_epoch(Some("1/3"), None, None, Some("1796161200")),
            Ok((
                Shard { index: 1, count: 3 },
                Some(1_796_161_200_000_000_000)
            ))
        );
    }

    fn manifest() -> Manifest {
        Manifest {
            manifest_version: MANIFEST_VERSION,
            config_hash: hex(&[1; 32]),
            schedule_digest: hex(&[2; 32]),
            schedule_requests: 10,
            shard_count: 2,
            epoch_realtime_ns: 1_700_000_000_000_000_000,
            shards: (0..2)
                .map(|k| ManifestShard {
                    index: k,
                    file: format!("s{k}.pj"),
                    file_bytes: 1000 + u64::from(k),
                    chain_head: hex(&[3 + k as u8; 32]),
                    seal: "completed".into(),
                    requests: 5,
                    hostname: "h".into(),
                    boot_id: "b".into(),
                    clock: "synchronized; maxerror 100 us".into(),
                    start_late_ms: 0.0,
                })
                .collect(),
            binding: String::new(),
            signature: None,
        }
    }

    /// A manifest's keys are exactly the documented ones, each once (JOURNAL.md §Manifest):
    /// `signature` is written even unsigned, as `null`; a missing, repeated or unknown key, or
    /// another version, does not parse.
    #[test]
    fn a_manifest_has_exactly_its_keys_each_once() {
        let mut m = manifest();
        m.seal(None).unwrap();
        let text = m.to_json();
        assert!(text.contains("\"signature\": null"), "{text}");
        assert_eq!(Manifest::parse(&text).unwrap(), m);
        let without = text.replace(",\n  \"signature\": null", "");
        assert_ne!(without, text);
        let e = Manifest::parse(&without).unwrap_err();
        assert_eq!(e.kind(), ManifestErrorKind::Format);
        assert!(e.to_string().contains("missing field `signature`"), "{e}");
        let twice = text.replacen(
            "\"shard_count\": 2,",
            "\"shard_count\": 2,\n  \"shard_count\": 3,",
            1,
        );
        let e = Manifest::parse(&twice).unwrap_err();
        assert_eq!(e.kind(), ManifestErrorKind::Format);
        assert!(
            e.to_string().contains("duplicate field `shard_count`"),
            "{e}"
        );
        let e = Manifest::parse(&text.replacen(
            "\"file\": \"s0.pj\"",
            "\"file\": \"s0.pj\", \"file\": \"s1.pj\"",
            1,
        ))
        .unwrap_err();
        assert_eq!(e.kind(), ManifestErrorKind::Format);
        assert!(e.to_string().contains("duplicate field `file`"), "{e}");
        let e =
            Manifest::parse(&text.replace("\"binding\"", "\"extra\": 1, \"binding\"")).unwrap_err();
        assert_eq!(e.kind(), ManifestErrorKind::Format);
        assert!(e.to_string().contains("unknown field `extra`"), "{e}");
        let e =
            Manifest::parse(&text.replace("\"manifest_version\": 1", "\"manifest_version\": 2"))
                .unwrap_err();
        assert_eq!(e.kind(), ManifestErrorKind::Version, "{e}");
        let e = Manifest::parse(&text.replace("\n  \"binding\"", "\n  \"binding_\"")).unwrap_err();
        assert_eq!(e.kind(), ManifestErrorKind::Format);
        assert!(e.to_string().contains("binding"), "{e}");
    }

    #[test]
    fn the_binding_covers_every_head_and_a_signature_names_its_key() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let mut m = manifest();
        m.seal(Some(&key)).unwrap();
        let text = m.to_json();
        let back = Manifest::parse(&text).unwrap();
        assert_eq!(back, m);
        back.check_binding(None).unwrap();
        back.check_binding(Some(key.verifying_key().to_bytes()))
            .unwrap();
        let other = SigningKey::from_bytes(&[8; 32]).verifying_key().to_bytes();
        let e = back.check_binding(Some(other)).unwrap_err().to_string();
        assert!(e.contains("not by the trusted key"), "{e}");
        // Any bound field edited after merge breaks the binding.
        let mut edited = m.clone();
        edited.shards[1].chain_head = hex(&[9; 32]);
        let e = edited.check_binding(None).unwrap_err().to_string();
        assert!(e.contains("edited after merge"), "{e}");
        let mut edited = m.clone();
        edited.epoch_realtime_ns += 1;
        assert!(edited.check_binding(None).is_err());
        // A signature over another binding does not verify.
        let mut forged = m.clone();
        forged.shards[0].file_bytes += 1;
        forged.binding = hex(&forged.compute_binding().unwrap());
        let e = forged.check_binding(None).unwrap_err().to_string();
        assert!(e.contains("does not verify"), "{e}");
        // Unsigned, with a key demanded.
        let mut unsigned = manifest();
        unsigned.seal(None).unwrap();
        assert!(unsigned.check_binding(Some(other)).is_err());
        // A shard listed twice.
        let mut twice = manifest();
        twice.shards[1].index = 0;
        twice.seal(None).unwrap();
        let e = twice.check_binding(None).unwrap_err().to_string();
        assert!(e.contains("once each"), "{e}");
        // Upper-case hex is refused in every field alike, the binding and the signature
        // included (before, the binding was compared as text and the signature parsed).
        for edit in [
            |m: &mut Manifest| m.binding = m.binding.to_ascii_uppercase(),
            |m: &mut Manifest| {
                let s = m.signature.as_mut().unwrap();
                s.signature = s.signature.to_ascii_uppercase()
            },
            |m: &mut Manifest| {
                let s = m.signature.as_mut().unwrap();
                s.public_key = s.public_key.to_ascii_uppercase()
            },
        ] {
            let mut upper = m.clone();
            edit(&mut upper);
            let e = upper.check_binding(None).unwrap_err().to_string();
            assert!(e.contains("lowercase hex"), "{e}");
        }
        assert_eq!(
            Manifest::parse("{\"manifest_version\": 2}")
                .unwrap_err()
                .kind(),
            ManifestErrorKind::Format,
            "a version-2 manifest of version-1 keys is not read as either"
        );
        assert!(
            Manifest::parse(&text.replace("\"binding\"", "\"extra\": 1, \"binding\"")).is_err()
        );
    }
}
