//! The journal header, laid out byte by byte (formats/JOURNAL.md §Header).
//!
//! Primitives are little-endian: `u8`, `u16`, `u32`, `u64`, `i64`; `bytes` is a `u32` length and
//! that many bytes; `str` is `bytes` holding UTF-8; `hash` is 32 raw bytes; `opt<T>` is a byte 0
//! (absent) or 1 followed by `T`; `list<T>` is a `u32` count followed by the items.

use std::fmt;

use super::{hex, FILE_PREFIX_BYTES, FORMAT_VERSION, HASH_BYTES, HEADER_BODY_BYTES_MAX, MAGIC};
use crate::schedule::{Arrival, Grid, Phase, RouteWeight, ScheduleParams, Workload};

/// Most items in any header list (phases, routes, host facts, extensions).
pub const HEADER_LIST_ITEMS_MAX: u32 = 4096;

/// Where the recorder's clock stood at the epoch that every timestamp counts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockAnchors {
    /// The raw monotonic clock reading at the epoch, ns.
    pub monotonic_epoch_ns: u64,
    /// The realtime clock at the same instant, ns since the Unix epoch (for humans only).
    pub realtime_epoch_ns: i64,
    /// The clock every timestamp was taken on, e.g. `CLOCK_MONOTONIC`.
    pub source: String,
}

/// Everything a journal says about its run before the first record.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The record codec; must equal [`super::CODEC`].
    pub codec: String,
    /// The spec version in force at capture, e.g. `v0.2`.
    pub spec_version: String,
    /// The recorder's version.
    pub tool_version: String,
    /// The git commit the tool was built from, or `unknown`.
    pub tool_commit: String,
    /// `experiment`, `dev` or `hosted`.
    pub profile: String,
    /// 1 unless the profile is `dev`.
    pub dev_time_factor: u32,
    /// BLAKE3 of `config_bytes`.
    pub config_hash: [u8; 32],
    /// The configuration exactly as loaded.
    pub config_bytes: Vec<u8>,
    /// The schedule's parameters; the analyzer regenerates every intended time from them.
    pub schedule: ScheduleParams,
    /// How many requests the whole schedule holds (all shards together).
    pub schedule_requests: u64,
    /// BLAKE3 over every scheduled (index, intended time, route) (§J.4).
    pub schedule_digest: [u8; 32],
    /// The epoch on the monotonic and the realtime clock.
    pub clock: ClockAnchors,
    /// Facts about the recording host (kernel, CPU model, cores, hostname), as key and value.
    pub host: Vec<(String, String)>,
    /// This journal holds the indices `i` with `i mod shard_count == shard_index`.
    pub shard_index: u32,
    /// How many shards share the schedule (1 for a single recorder).
    pub shard_count: u32,
    /// The ed25519 public key that signs checkpoints and the seal, if the operator gave one.
    pub signing_key: Option<[u8; 32]>,
    /// Named additions readers may ignore; how later issues add header facts without a version bump.
    pub extensions: Vec<(String, Vec<u8>)>,
}

/// Why header bytes could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderError {
    /// The file does not start with the journal magic.
    NotAJournal,
    /// A journal of a format version this build does not read.
    UnsupportedVersion {
        /// The version the file declares.
        found: u16,
    },
    /// The file ends inside the header: a torn file.
    Truncated {
        /// Bytes the header needs.
        needed: usize,
        /// Bytes the file has.
        available: usize,
    },
    /// A field is out of its domain or the lengths do not add up.
    Malformed {
        /// The byte offset of the field.
        offset: usize,
        /// What is wrong with it.
        what: String,
    },
    /// The stored header hash does not match the header bytes.
    HashMismatch {
        /// The byte offset of the stored hash.
        offset: usize,
        /// The hash of the header bytes.
        expected: [u8; 32],
        /// The hash the file stores.
        found: [u8; 32],
    },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::NotAJournal => write!(f, "not a percentes journal (magic bytes differ)"),
            HeaderError::UnsupportedVersion { found } => {
                write!(
                    f,
                    "journal format version {found}; this build reads version {FORMAT_VERSION}"
                )
            }
            HeaderError::Truncated { needed, available } => {
                write!(
                    f,
                    "file ends inside the header ({available} of {needed} bytes)"
                )
            }
            HeaderError::Malformed { offset, what } => {
                write!(f, "header malformed at byte {offset}: {what}")
            }
            HeaderError::HashMismatch {
                offset,
                expected,
                found,
            } => write!(
                f,
                "header hash at byte {offset} is {} but the header bytes hash to {}",
                hex(found),
                hex(expected)
            ),
        }
    }
}

impl Header {
    /// The complete header bytes: prefix, body and header hash.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(1024 + self.config_bytes.len());
        put_str(&mut body, &self.codec);
        put_str(&mut body, &self.spec_version);
        put_str(&mut body, &self.tool_version);
        put_str(&mut body, &self.tool_commit);
        put_str(&mut body, &self.profile);
        body.extend_from_slice(&self.dev_time_factor.to_le_bytes());
        body.extend_from_slice(&self.config_hash);
        put_bytes(&mut body, &self.config_bytes);
        // schedule parameters
        body.extend_from_slice(&self.schedule.seed.to_le_bytes());
        body.push(self.schedule.arrival.code());
        put_u32(&mut body, self.schedule.phases.len());
        for phase in &self.schedule.phases {
            put_str(&mut body, &phase.name);
            body.extend_from_slice(&phase.duration_ns.to_le_bytes());
            body.extend_from_slice(&phase.rate_rps.to_bits().to_le_bytes());
        }
        put_u32(&mut body, self.schedule.routes.len());
        for route in &self.schedule.routes {
            put_str(&mut body, &route.label);
            body.extend_from_slice(&route.weight.to_le_bytes());
        }
        match self.schedule.inject_at_ns {
            None => body.push(0),
            Some(t) => {
                body.push(1);
                body.extend_from_slice(&t.to_le_bytes());
            }
        }
        body.extend_from_slice(&self.schedule_requests.to_le_bytes());
        body.extend_from_slice(&self.schedule_digest);
        // clock anchors
        body.extend_from_slice(&self.clock.monotonic_epoch_ns.to_le_bytes());
        body.extend_from_slice(&self.clock.realtime_epoch_ns.to_le_bytes());
        put_str(&mut body, &self.clock.source);
        put_u32(&mut body, self.host.len());
        for (key, value) in &self.host {
            put_str(&mut body, key);
            put_str(&mut body, value);
        }
        body.extend_from_slice(&self.shard_index.to_le_bytes());
        body.extend_from_slice(&self.shard_count.to_le_bytes());
        match &self.signing_key {
            None => body.push(0),
            Some(key) => {
                body.push(1);
                body.extend_from_slice(key);
            }
        }
        // The schedule rule travels as an extension (JOURNAL.md), so a v1 reader that predates it
        // still reads the header; rule 1 is the extension's absence, which keeps older
        // journals' bytes as they were.
        let rule = self.schedule.grid.code().map(|code| {
            (
                crate::schedule::SCHEDULE_RULE_EXTENSION.to_owned(),
                vec![code],
            )
        });
        // The workload model likewise: open is its absence; and a shared-prefix pool.
        let workload = self
            .schedule
            .workload
            .encode()
            .map(|bytes| (crate::schedule::WORKLOAD_EXTENSION.to_owned(), bytes));
        let prefixes = self
            .schedule
            .prefixes
            .as_ref()
            .map(|pool| (crate::schedule::PREFIX_EXTENSION.to_owned(), pool.encode()));
        let abandon = self
            .schedule
            .abandon
            .map(|a| (crate::schedule::ABANDON_EXTENSION.to_owned(), a.encode()));
        let history = self
            .schedule
            .history
            .map(|h| (crate::schedule::HISTORY_EXTENSION.to_owned(), h.encode()));
        put_u32(
            &mut body,
            self.extensions.len()
                + usize::from(rule.is_some())
                + usize::from(workload.is_some())
                + usize::from(prefixes.is_some())
                + usize::from(abandon.is_some())
                + usize::from(history.is_some()),
        );
        for (key, value) in self
            .extensions
            .iter()
            .chain(rule.as_ref())
            .chain(workload.as_ref())
            .chain(prefixes.as_ref())
            .chain(abandon.as_ref())
            .chain(history.as_ref())
        {
            put_str(&mut body, key);
            put_bytes(&mut body, value);
        }
        assert!(
            body.len() <= HEADER_BODY_BYTES_MAX as usize,
            "header body of {} bytes",
            body.len()
        );

        let mut out = Vec::with_capacity(FILE_PREFIX_BYTES + body.len() + HASH_BYTES);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        let body_len = body.len() as u32;
        out.extend_from_slice(&body_len.to_le_bytes());
        out.extend_from_slice(&(!body_len).to_le_bytes());
        out.extend_from_slice(&body);
        let hash = blake3::hash(&out);
        out.extend_from_slice(hash.as_bytes());
        out
    }

    /// Reads the header at the start of `bytes`. Returns the header, its length in bytes including
    /// the hash, and the hash (the chain's first value).
    pub fn decode(bytes: &[u8]) -> Result<(Header, usize, [u8; 32]), HeaderError> {
        let truncated = |needed: usize| HeaderError::Truncated {
            needed,
            available: bytes.len(),
        };
        let available_magic = bytes.len().min(MAGIC.len());
        if bytes[..available_magic] != MAGIC[..available_magic] || bytes.is_empty() {
            return Err(HeaderError::NotAJournal);
        }
        if bytes.len() < 10 {
            return Err(truncated(FILE_PREFIX_BYTES));
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != FORMAT_VERSION {
            return Err(HeaderError::UnsupportedVersion { found: version });
        }
        if bytes.len() < FILE_PREFIX_BYTES {
            return Err(truncated(FILE_PREFIX_BYTES));
        }
        let flags = u16::from_le_bytes([bytes[10], bytes[11]]);
        if flags != 0 {
            return Err(HeaderError::Malformed {
                offset: 10,
                what: format!("flags {flags:#06x}, v1 defines none"),
            });
        }
        let body_len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
        let check = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
        if check != !body_len {
            return Err(HeaderError::Malformed {
                offset: 12,
                what: format!("body length {body_len} and its complement {check:#010x} disagree"),
            });
        }
        if body_len > HEADER_BODY_BYTES_MAX {
            return Err(HeaderError::Malformed {
                offset: 12,
                what: format!("body length {body_len} exceeds {HEADER_BODY_BYTES_MAX}"),
            });
        }
        let body_end = FILE_PREFIX_BYTES + body_len as usize;
        let header_end = body_end + HASH_BYTES;
        if bytes.len() < header_end {
            return Err(truncated(header_end));
        }
        let expected = *blake3::hash(&bytes[..body_end]).as_bytes();
        let found: [u8; 32] = bytes[body_end..header_end].try_into().expect("32 bytes");
        if expected != found {
            return Err(HeaderError::HashMismatch {
                offset: body_end,
                expected,
                found,
            });
        }
        let mut r = Cursor {
            bytes: &bytes[..body_end],
            pos: FILE_PREFIX_BYTES,
        };
        let mut header = Header {
            codec: r.str("codec")?,
            spec_version: r.str("spec version")?,
            tool_version: r.str("tool version")?,
            tool_commit: r.str("tool commit")?,
            profile: r.str("profile")?,
            dev_time_factor: r.u32("dev time factor")?,
            config_hash: r.hash("config hash")?,
            config_bytes: r.bytes("config bytes")?.to_vec(),
            schedule: {
                let seed = r.u64("schedule seed")?;
                let arrival_at = r.pos;
                let arrival =
                    Arrival::from_code(r.u8("arrival")?).ok_or_else(|| HeaderError::Malformed {
                        offset: arrival_at,
                        what: "arrival process code is neither 0 (poisson) nor 1 (deterministic)"
                            .into(),
                    })?;
                let phases = r.list("phases", |r| {
                    Ok(Phase {
                        name: r.str("phase name")?,
                        duration_ns: r.u64("phase duration")?,
                        rate_rps: f64::from_bits(r.u64("phase rate")?),
                    })
                })?;
                let routes = r.list("routes", |r| {
                    Ok(RouteWeight {
                        label: r.str("route label")?,
                        weight: r.u32("route weight")?,
                    })
                })?;
                let inject_at_ns = r.opt("inject time", |r| r.u64("inject time"))?;
                ScheduleParams {
                    seed,
                    arrival,
                    phases,
                    routes,
                    inject_at_ns,
                    // Rule 1 until the extensions say otherwise (below).
                    grid: Grid::PerPhase,
                    // Open until the extensions say otherwise (below).
                    workload: Workload::Open,
                    // None until the extensions say otherwise (below).
                    prefixes: None,
                    abandon: None,
                    history: None,
                }
            },
            schedule_requests: r.u64("schedule request count")?,
            schedule_digest: r.hash("schedule digest")?,
            clock: ClockAnchors {
                monotonic_epoch_ns: r.u64("monotonic epoch")?,
                realtime_epoch_ns: r.u64("realtime epoch")? as i64,
                source: r.str("clock source")?,
            },
            host: r.list("host facts", |r| {
                Ok((r.str("host fact key")?, r.str("host fact value")?))
            })?,
            shard_index: r.u32("shard index")?,
            shard_count: r.u32("shard count")?,
            signing_key: r.opt("signing key", |r| r.hash("signing key"))?,
            extensions: r.list("extensions", |r| {
                Ok((r.str("extension key")?, r.bytes("extension")?.to_vec()))
            })?,
        };
        if r.pos != body_end {
            return Err(HeaderError::Malformed {
                offset: r.pos,
                what: format!("{} bytes after the last header field", body_end - r.pos),
            });
        }
        // Each key once: a reader that took the first of two and one that took the last would
        // read two different journals from one file.
        for (list, keys) in [
            (
                "host fact",
                header.host.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ),
            (
                "extension",
                header.extensions.iter().map(|(k, _)| k).collect(),
            ),
        ] {
            let mut seen = std::collections::BTreeSet::new();
            if let Some(again) = keys.into_iter().find(|k| !seen.insert(*k)) {
                return Err(HeaderError::Malformed {
                    offset: FILE_PREFIX_BYTES,
                    what: format!("the {list} key {again:?} appears twice"),
                });
            }
        }
        if let Some(value) = take(
            &mut header.extensions,
            crate::schedule::SCHEDULE_RULE_EXTENSION,
        ) {
            header.schedule.grid = Grid::from_code(&value).ok_or_else(|| HeaderError::Malformed {
                offset: FILE_PREFIX_BYTES,
                what: format!(
                    "the header names schedule rule {value:?}, which this build does not know (it knows 2; no extension is rule 1)"
                ),
            })?;
        }
        // The other extensions a reader must apply (JOURNAL.md field 23), each out of the list.
        let malformed = |what: &str, why: &dyn std::fmt::Display| HeaderError::Malformed {
            offset: FILE_PREFIX_BYTES,
            what: format!("the header's {what}: {why}"),
        };
        let schedule = &mut header.schedule;
        if let Some(value) = take(&mut header.extensions, crate::schedule::WORKLOAD_EXTENSION) {
            schedule.workload =
                Workload::decode(&value).map_err(|why| malformed("workload model", &why))?;
        }
        if let Some(value) = take(&mut header.extensions, crate::schedule::PREFIX_EXTENSION) {
            let pool = crate::schedule::PrefixPool::decode(&value);
            schedule.prefixes = Some(pool.map_err(|why| malformed("shared-prefix pool", &why))?);
        }
        if let Some(value) = take(&mut header.extensions, crate::schedule::ABANDON_EXTENSION) {
            let abandon = crate::schedule::Abandonment::decode(&value);
            schedule.abandon = Some(abandon.map_err(|why| malformed("abandonment", &why))?);
        }
        if let Some(value) = take(&mut header.extensions, crate::schedule::HISTORY_EXTENSION) {
            let history = crate::schedule::History::decode(&value);
            schedule.history =
                Some(history.map_err(|why| malformed("conversation history", &why))?);
        }
        if *blake3::hash(&header.config_bytes).as_bytes() != header.config_hash {
            return Err(HeaderError::Malformed {
                offset: FILE_PREFIX_BYTES,
                what: "the config bytes do not hash to the recorded config hash".into(),
            });
        }
        // The profile and the time factor are what `inspect`, `verify` and every report print
        // the run as; each is checked in its domain (a crafted `Xev`, or a factor past the dev
        // profile's range, is damage, not a run).
        let factor_ok = match header.profile.as_str() {
            "dev" => (1..=crate::config::DEV_TIME_FACTOR_MAX).contains(&header.dev_time_factor),
            "experiment" | "hosted" => header.dev_time_factor == 1,
            _ => {
                return Err(HeaderError::Malformed {
                    offset: FILE_PREFIX_BYTES,
                    what: format!(
                        "profile {:?} is none of experiment, dev, hosted",
                        header.profile
                    ),
                })
            }
        };
        if !factor_ok {
            return Err(HeaderError::Malformed {
                offset: FILE_PREFIX_BYTES,
                what: format!(
                    "dev time factor {} is out of its domain for profile {} (1 unless dev; dev: 1 to {})",
                    header.dev_time_factor,
                    header.profile,
                    crate::config::DEV_TIME_FACTOR_MAX
                ),
            });
        }
        if header.shard_count == 0 || header.shard_index >= header.shard_count {
            return Err(HeaderError::Malformed {
                offset: body_end,
                what: format!(
                    "shard {} of {} does not exist",
                    header.shard_index, header.shard_count
                ),
            });
        }
        Ok((header, header_end, found))
    }

    /// The host fact `fact`, if present.
    pub fn fact(&self, fact: HostFact) -> Option<&str> {
        self.host_fact(fact.key())
    }

    /// The host fact of key `key` (a keyed family's, [`HostFact::accelerator`], or one this
    /// build does not know), if present.
    pub fn host_fact(&self, key: &str) -> Option<&str> {
        self.host
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(
        &u32::try_from(n)
            .expect("header list or field over 4 GiB")
            .to_le_bytes(),
    );
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    put_bytes(out, text.as_bytes());
}

/// Reads header primitives; every error names the field and its byte offset.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], HeaderError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| HeaderError::Malformed {
                offset: self.pos,
                what: format!(
                    "{what} needs {n} bytes, {} remain in the header body",
                    self.bytes.len() - self.pos
                ),
            })?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u8(&mut self, what: &str) -> Result<u8, HeaderError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, HeaderError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64, HeaderError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    fn hash(&mut self, what: &str) -> Result<[u8; 32], HeaderError> {
        Ok(self.take(32, what)?.try_into().expect("32 bytes"))
    }
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], HeaderError> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }
    fn str(&mut self, what: &str) -> Result<String, HeaderError> {
        let at = self.pos;
        let raw = self.bytes(what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| HeaderError::Malformed {
            offset: at,
            what: format!("{what} is not UTF-8"),
        })
    }
    fn opt<T>(
        &mut self,
        what: &str,
        item: impl Fn(&mut Self) -> Result<T, HeaderError>,
    ) -> Result<Option<T>, HeaderError> {
        let at = self.pos;
        match self.u8(what)? {
            0 => Ok(None),
            1 => item(self).map(Some),
            other => Err(HeaderError::Malformed {
                offset: at,
                what: format!("{what} presence byte is {other}, not 0 or 1"),
            }),
        }
    }
    fn list<T>(
        &mut self,
        what: &str,
        item: impl Fn(&mut Self) -> Result<T, HeaderError>,
    ) -> Result<Vec<T>, HeaderError> {
        let at = self.pos;
        let n = self.u32(what)?;
        if n > HEADER_LIST_ITEMS_MAX {
            return Err(HeaderError::Malformed {
                offset: at,
                what: format!("{what} lists {n} items; at most {HEADER_LIST_ITEMS_MAX}"),
            });
        }
        (0..n).map(|_| item(self)).collect()
    }
}

/// The keys of the header's host facts (its `host` list of key and value), one type for the
/// recorder that writes them and every reader (the analyzer, the manifest, `inspect`), so none
/// matches another's spelling. A journal from before a key existed lacks it; a key a reader does
/// not know is kept and shown as it is. Three families are keyed by a name:
/// [`HostFact::accelerator`], [`HostFact::prompt_set`] and [`HostFact::images`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostFact {
    /// The recording host's name.
    Hostname,
    /// The kernel release.
    Kernel,
    /// The CPU model.
    Cpu,
    /// The CPUs this process may use.
    Cores,
    /// The recorder's worker threads.
    RecorderWorkers,
    /// The loopback canary: its interval, or `off` (SPEC §2).
    Canary,
    /// The I/O runtime and its ring set-up.
    Io,
    /// How requests are attributed to replicas (the response header read).
    ReplicaAttribution,
    /// The TLS stack and whether it verified certificates.
    Tls,
    /// The recorder's own cgroup and its CPU quota, or why none was read (G2.3).
    CgroupCpu,
    /// The tokenizer that counted prompt lengths (SPEC §P).
    Tokenizer,
    /// Where the API key came from (never the key).
    ApiKey,
    /// Each `[target.secret_headers]` header and the variable its value came from (never the
    /// value).
    SecretHeaders,
    /// The open-file limit.
    OpenFiles,
    /// What the pre-flight asked before the epoch: the models list, and the one sample request
    /// (not a scheduled request: its index is past every schedule), with their answers.
    Preflight,
    /// Where the recorder's workers ran (pinned by `--cpus` or left to the kernel) and which
    /// ticker measured the runtime stall (SPEC §2 "Placement", "Runtime stall").
    Placement,
    /// Where the target's processes ran beside the recorder, when the study runner placed them
    /// (`[testbed.placement]`): each side's control group, CPUs and quota (SPEC §2 "Placement").
    TargetPlacement,
    /// What the host check before the run saw (`percentes doctor`'s measurements).
    HostCheck,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`): shards with the same one read
    /// one clock.
    BootId,
    /// The clock discipline as the kernel reports it (adjtimex): `synchronized` or
    /// `unsynchronized`, with the kernel's state.
    ClockSync,
    /// The kernel's bound on the realtime clock's error, microseconds (adjtimex `maxerror`).
    ClockMaxerrorUs,
    /// The kernel's estimate of the realtime clock's error, microseconds (adjtimex `esterror`).
    ClockEsterrorUs,
    /// Realtime minus monotonic at the epoch, ns (the two anchors' difference, stated once).
    RealtimeMinusMonotonicNs,
    /// The agreed epoch given with `--start-at`, ns since the Unix epoch.
    StartAtNs,
    /// How long after the latest moment it could still have been on time the recorder was ready
    /// (0 when on time), ns.
    StartLateNs,
    /// A replay's trace: its requests within the schedule, those past its end, whether its own
    /// requests were sent, its BLAKE3.
    Trace,
    /// What the fault's injector checked before the run (`network-policy`: the CNI found to
    /// enforce NetworkPolicy, and no policy of the partition's name left over).
    FaultCheck,
    /// The proxy a study runner put between the recorder and the replicas, with its settings
    /// that move a response's timing (SPEC §2 "The first token's path"; issue 52).
    Proxy,
    /// The capacity probe: the pre-flight's sample requests' times to their last byte, ms
    /// ([`crate::journal::probe`]; SPEC §10 "Capacity check", A4).
    CapacityProbe,
}

impl HostFact {
    /// Every key, in the order a recorder writes them.
    pub const ALL: [HostFact; 29] = [
        HostFact::Hostname,
        HostFact::Kernel,
        HostFact::Cpu,
        HostFact::Cores,
        HostFact::RecorderWorkers,
        HostFact::Canary,
        HostFact::Io,
        HostFact::ReplicaAttribution,
        HostFact::Tls,
        HostFact::CgroupCpu,
        HostFact::Tokenizer,
        HostFact::ApiKey,
        HostFact::SecretHeaders,
        HostFact::OpenFiles,
        HostFact::Preflight,
        HostFact::Placement,
        HostFact::TargetPlacement,
        HostFact::HostCheck,
        HostFact::BootId,
        HostFact::ClockSync,
        HostFact::ClockMaxerrorUs,
        HostFact::ClockEsterrorUs,
        HostFact::RealtimeMinusMonotonicNs,
        HostFact::StartAtNs,
        HostFact::StartLateNs,
        HostFact::Trace,
        HostFact::FaultCheck,
        HostFact::Proxy,
        HostFact::CapacityProbe,
    ];

    /// Its key in the header (a key never changes spelling).
    pub const fn key(self) -> &'static str {
        match self {
            HostFact::Hostname => "hostname",
            HostFact::Kernel => "kernel",
            HostFact::Cpu => "cpu",
            HostFact::Cores => "cores",
            HostFact::RecorderWorkers => "recorder-workers",
            HostFact::Canary => "canary",
            HostFact::Io => "io",
            HostFact::ReplicaAttribution => "replica-attribution",
            HostFact::Tls => "tls",
            HostFact::CgroupCpu => "cgroup-cpu",
            HostFact::Tokenizer => "tokenizer",
            HostFact::ApiKey => "api-key",
            HostFact::SecretHeaders => "secret-headers",
            HostFact::OpenFiles => "open-files",
            HostFact::Preflight => "preflight",
            HostFact::Placement => "placement",
            HostFact::TargetPlacement => "target-placement",
            HostFact::HostCheck => "host-check",
            HostFact::BootId => "boot-id",
            HostFact::ClockSync => "clock-sync",
            HostFact::ClockMaxerrorUs => "clock-maxerror-us",
            HostFact::ClockEsterrorUs => "clock-esterror-us",
            HostFact::RealtimeMinusMonotonicNs => "clock-realtime-minus-monotonic-ns",
            HostFact::StartAtNs => "shard-start-at-ns",
            HostFact::StartLateNs => "shard-start-late-ns",
            HostFact::Trace => "trace",
            HostFact::FaultCheck => "fault-check",
            HostFact::Proxy => "proxy",
            HostFact::CapacityProbe => "capacity-probe",
        }
    }

    /// The key with this spelling, if this build knows it.
    pub fn from_key(key: &str) -> Option<HostFact> {
        HostFact::ALL.into_iter().find(|f| f.key() == key)
    }

    /// The fact as the header's list holds it.
    pub fn entry(self, value: impl Into<String>) -> (String, String) {
        (self.key().to_owned(), value.into())
    }

    /// The key of replica `name`'s accelerator collector's output (G5).
    pub fn accelerator(name: &str) -> String {
        format!("accelerator.{name}")
    }

    /// The key of route `label`'s prompt set.
    pub fn prompt_set(label: &str) -> String {
        format!("prompt-set {label}")
    }

    /// The key of route `label`'s attached images (their files, types, sizes and BLAKE3s).
    pub fn images(label: &str) -> String {
        format!("images {label}")
    }
}

/// Removes extension `key` from `extensions` and gives its value, if the header has it.
fn take(extensions: &mut Vec<(String, Vec<u8>)>, key: &str) -> Option<Vec<u8>> {
    let at = extensions.iter().position(|(k, _)| k == key)?;
    Some(extensions.remove(at).1)
}
