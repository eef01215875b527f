//! Loading a journal for analysis: verification first, then the schedule regenerated from the
//! header and every scheduled index accounted for exactly once (SPEC §3, §9, §J.4).
//!
//! A tampered journal is refused. An unsealed, aborted or escaped one loads for diagnosis, and
//! the run says why it is not publishable, as does a dev-profile run.

use std::fmt;
use std::path::PathBuf;

use percentes_formats::config::Config;
use percentes_formats::journal::cgroup::CgroupCpu;
use percentes_formats::journal::manifest::Manifest;
use percentes_formats::journal::records::{EventKind, Record, SealStatus};
use percentes_formats::journal::scrape::ScrapeRecord;
use percentes_formats::journal::stream::StreamRecord;
use percentes_formats::journal::verify::{render, VerifyOptions, VerifyReport};
use percentes_formats::journal::{Header, Verdict};
use percentes_formats::schedule::{ScheduleParams, Workload};

mod mismatch;
pub mod prefixes;
mod sessions;

pub use mismatch::{FollowUpMismatch, ScheduleMismatch};

use crate::frame::{CgroupRow, Events, Requests, SpillError, Telemetry, NONE, NO_RECORD};
use crate::JournalFile;

/// A journal, checked and decoded.
#[derive(Debug)]
pub struct Run {
    /// The journal's header.
    pub header: Header,
    /// The configuration the run was recorded with, parsed from the header's bytes.
    pub config: Config,
    /// Its verification report (verdict, counts, seal, signatures); of shard 0 for a merged run.
    pub report: VerifyReport,
    /// Every journal's verification report, in the order of the files loaded (one for a single
    /// journal; a merged run's shards in index order).
    pub parts: Vec<VerifyReport>,
    /// One row per scheduled request of the shard, in index order; rows without a record are
    /// listed in `missing`.
    pub requests: Requests,
    /// One row per event record.
    pub events: Events,
    /// One row per telemetry record.
    pub telemetry: Telemetry,
    /// The server's metrics, one record per answered scrape, in journal order (SPEC §2
    /// "Server-side evidence"; only the coordinating shard scrapes).
    pub scrapes: Vec<ScrapeRecord>,
    /// Scheduled indices of this shard with no record (possible only in an unpublishable run).
    pub missing: Vec<u64>,
    /// Why nothing from this run may be published; empty when it may be.
    pub not_publishable: Vec<String>,
    /// The manifest that bound a merged run's shards ([`crate::shards::open`]); `None` for one
    /// journal.
    pub manifest: Option<Manifest>,
    /// What the auditor's trusted head or key vouched for ([`Options::expect_head`],
    /// [`Options::trusted_key`]), in words; `None` when neither was given.
    pub vouched: Option<String>,
    /// Each request's shared prefix and its designed reuse, where the schedule declares a pool
    /// or a conversation history (SPEC §1 "Shared prefixes", "Conversation histories").
    pub prefixes: Option<prefixes::Prefixes>,
}

/// Why a journal cannot be analyzed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// Verification failed outright (tampered, not a journal, unsupported version).
    Unverified(Box<VerifyReport>),
    /// The header's configuration does not parse under this build.
    Config(percentes_formats::config::ConfigError),
    /// The schedule regenerated from the header differs from the one the header recorded.
    Schedule(ScheduleMismatch),
    /// A record breaks the one-record-per-index rule or disagrees with the schedule.
    Record {
        /// The record's position in the journal.
        sequence: u64,
        /// What is wrong with it.
        message: String,
    },
    /// The request table is over its memory budget and its spill files could not be made.
    Spill(SpillError),
    /// A sealed, completed journal lacks records for scheduled indices.
    Missing {
        /// How many indices have no record.
        count: usize,
        /// The first of them.
        first: u64,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Unverified(report) => write!(f, "the journal does not verify; nothing is analyzed:\n{}", render(report)),
            LoadError::Config(why) => write!(f, "the journal's configuration does not load: {why}"),
            LoadError::Schedule(why) => write!(f, "schedule check failed (SPEC §J.4): {why}"),
            LoadError::Record { sequence, message } => write!(f, "record {sequence}: {message}"),
            LoadError::Spill(error) => write!(f, "{error}"),
            LoadError::Missing { count, first } => write!(
                f,
                "the journal is sealed as completed but {count} scheduled requests have no record (first: index {first}); \
                 every scheduled request must appear exactly once"
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// Where the request table may live: in memory up to a budget, in spill files past it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The most bytes the request table may take on the heap ([`Requests::BYTES_PER_ROW`] a
    /// scheduled request); a larger table keeps its numeric columns in spill files, paged by the
    /// kernel ([`crate::frame::Column`]). The analysis gives the same bytes either way.
    pub table_memory: u64,
    /// The folder the spill files are made in. They are removed from it at once where the system
    /// allows (Unix), so nothing is left behind. It should be on a disk: a tmpfs is memory.
    pub spill_dir: PathBuf,
    /// Read one shard of a sharded run by itself ([`crate::shards::open_with`] refuses a lone
    /// shard otherwise): its analysis is marked not publishable, saying "shard k of N".
    pub shard_alone: bool,
    /// A chain head the auditor trusts (a manifest's binding for a merged run): the journal
    /// must end at it, or the load is refused.
    pub expect_head: Option<[u8; 32]>,
    /// The operator's public key: the journal (or manifest) must be signed by it.
    pub trusted_key: Option<[u8; 32]>,
}

impl Options {
    /// These options with the auditor's trusted head (64 hex digits: a journal's chain head, a
    /// manifest's binding) and public key file (as `percentes keygen` writes `PREFIX.pub`), as
    /// `verify --expect-head` and `--pubkey` take them.
    pub fn trusting(
        self,
        expect_head: Option<&str>,
        pubkey: Option<&std::path::Path>,
    ) -> Result<Options, percentes_formats::journal::verify::TrustError> {
        let trust = VerifyOptions::from_flags(expect_head, pubkey)?;
        Ok(Options {
            expect_head: trust.expect_head,
            trusted_key: trust.trusted_key,
            ..self
        })
    }
}

/// The default [`Options::table_memory`]: 2 GiB, a table of about 14 M scheduled requests (a
/// run of almost four hours at 1,000 rps) on the heap. Past it, the heap holds the analysis's
/// own working memory, about 47 bytes a request (BENCHMARKS.md, "Where the memory goes").
pub const DEFAULT_TABLE_MEMORY: u64 = 2 << 30;

impl Default for Options {
    fn default() -> Options {
        Options {
            table_memory: DEFAULT_TABLE_MEMORY,
            spill_dir: std::env::temp_dir(),
            shard_alone: false,
            expect_head: None,
            trusted_key: None,
        }
    }
}

/// A size as `--table-memory` takes it: a whole number of bytes, or of KiB, MiB, GiB or TiB
/// (`2GiB`, `512MiB`, `0` to spill every table).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let wrong = |kind: SizeErrorKind| SizeError {
        kind,
        text: text.to_owned(),
    };
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        other => return Err(wrong(SizeErrorKind::Unit(other.to_owned()))),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| wrong(SizeErrorKind::NotANumber))?;
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| wrong(SizeErrorKind::TooLarge))
}

/// A size `--table-memory` cannot read, with the text given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeError {
    /// What is wrong.
    pub kind: SizeErrorKind,
    /// The text given.
    pub text: String,
}

/// What is wrong with a size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeErrorKind {
    /// A unit other than B, KiB, MiB, GiB, TiB.
    Unit(String),
    /// No whole number before the unit.
    NotANumber,
    /// Over 16 EiB.
    TooLarge,
}

impl std::fmt::Display for SizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = &self.text;
        match &self.kind {
            SizeErrorKind::Unit(unit) => write!(
                f,
                "unknown unit {unit:?} in {text:?}: write bytes or KiB, MiB, GiB, TiB (e.g. 2GiB)"
            ),
            SizeErrorKind::NotANumber => write!(
                f,
                "{text:?} is not a size: write a whole number and a unit (e.g. 2GiB)"
            ),
            SizeErrorKind::TooLarge => write!(f, "{text:?} is larger than 16 EiB"),
        }
    }
}

impl std::error::Error for SizeError {}

impl Options {
    /// Whether a table of `rows` rows goes to spill files.
    pub fn spills(&self, rows: usize) -> bool {
        (rows as u64).saturating_mul(Requests::BYTES_PER_ROW) > self.table_memory
    }
}

/// Verifies, decodes and checks a journal.
pub fn load(file: &JournalFile) -> Result<Run, LoadError> {
    load_all(std::slice::from_ref(file))
}

/// Verifies, decodes and checks one journal, or the shard journals of one run in index order
/// (SPEC §2 "Sharded capture"; the cross-shard rules are checked before, by
/// [`crate::shards::open`]). A merged run has one row per scheduled index of the whole schedule,
/// each filled from the shard that holds it; its events are every shard's in time order, and its
/// telemetry every shard's, shard by shard ([`Telemetry::by_shard`]).
pub fn load_all(files: &[JournalFile]) -> Result<Run, LoadError> {
    let parts = files
        .iter()
        .map(|f| f.verify(&Default::default()))
        .collect();
    load_verified(files, parts)
}

/// [`load_all`] with each file's verification report already made (one per file, in order).
pub fn load_verified(files: &[JournalFile], parts: Vec<VerifyReport>) -> Result<Run, LoadError> {
    load_verified_with(files, parts, &Options::default())
}

/// [`load_verified`] with the request table placed by `options`.
pub fn load_verified_with(
    files: &[JournalFile],
    parts: Vec<VerifyReport>,
    options: &Options,
) -> Result<Run, LoadError> {
    let (report, header, config) = verified_header(files, &parts)?;
    let params = &header.schedule;
    schedule_of_its_config(&header, &config)?;
    // The rows: one journal holds its own shard's indices; merged shards hold them all.
    let shard = if files.len() == 1 {
        (u64::from(header.shard_index), u64::from(header.shard_count))
    } else {
        (0, 1)
    };
    for part in &parts {
        let h = part.header.as_ref().expect("checked above");
        if h.shard_count == 0 || h.shard_index >= h.shard_count {
            return Err(LoadError::Schedule(ScheduleMismatch::NoSuchShard {
                index: h.shard_index,
                count: h.shard_count,
            }));
        }
    }
    // Dense rows: the shard's p-th scheduled index is row p, so no map from index to row is kept.
    let mut requests = Requests::with_capacity(
        usize::try_from(header.schedule_requests / shard.1 + 1).unwrap_or(0),
    );
    let mut total = 0u64;
    for entry in params.iter() {
        total += 1;
        if entry.index % shard.1 == shard.0 {
            requests.push_scheduled(entry.index, entry.intended_ns, entry.route, entry.phase);
        }
    }
    if total != header.schedule_requests {
        return Err(LoadError::Schedule(ScheduleMismatch::Requests {
            regenerated: total,
            recorded: header.schedule_requests,
        }));
    }
    // A closed or semi-open run's follow-ups: rows after the schedule's, filled from their
    // records and checked against the model once all are read.
    let mut turns = sessions::Turns::of(params, files, &parts, total)?;
    for j in 0..turns.rows() as u64 {
        requests.push_scheduled(total + j, 0, 0, 0);
    }
    if options.spills(requests.len()) {
        requests
            .spill(&options.spill_dir)
            .map_err(LoadError::Spill)?;
    }
    requests.reserve_records().map_err(LoadError::Spill)?;
    // Which rows have had a kind-6 extension (at most one each).
    let mut extended = vec![false; requests.len()];
    // Each row's kind-8 stream record's sequence number (at most one each).
    let mut streamed: Vec<Option<u64>> = Vec::new();
    let mut first_sequence = vec![0u64; 0];
    let mut events = Events::default();
    let mut telemetry = Telemetry::default();
    let mut scrapes = Vec::new();
    let mut scrape_rules = percentes_formats::journal::scrape::rules::ScrapeRules::default();
    for (part, (file, report)) in files.iter().zip(&parts).enumerate() {
        let own = report.header.as_ref().expect("checked above");
        let own = (u64::from(own.shard_index), u64::from(own.shard_count));
        let mut released = 0u64;
        let telemetry_start = telemetry.rows.len();
        for (framed, decoded) in file.records(report) {
            if framed.byte_offset >= released + crate::RELEASE_EVERY_BYTES {
                file.release_before(framed.byte_offset);
                // And a spilled table's pages written so far (they stay in the page cache).
                requests.release();
                released = framed.byte_offset;
            }
            let record = decoded.map_err(|e| LoadError::Record {
                sequence: framed.sequence,
                message: format!(
                    "{e} (byte offset {}{})",
                    framed.byte_offset,
                    shard_named(files, part)
                ),
            })?;
            match record {
                Record::Request(r) => {
                    let row = placed(r.index, own, shard, requests.len()).ok_or_else(|| {
                        LoadError::Record {
                            sequence: framed.sequence,
                            message: unscheduled(
                                "request index",
                                r.index,
                                own,
                                header.schedule_requests,
                                &shard_named(files, part),
                            ),
                        }
                    })?;
                    if requests.outcome[row] != NO_RECORD {
                        if first_sequence.is_empty() {
                            first_sequence = sequences_of(file, report, r.index);
                        }
                        return Err(LoadError::Record {
                            sequence: framed.sequence,
                            message: format!(
                                "request index {} appears twice (records {:?})",
                                r.index, first_sequence
                            ),
                        });
                    }
                    let (intended_ns, route) = (requests.intended_ns[row], requests.route[row]);
                    if turns.is_follow_up(row) {
                        turns.fill(&mut requests, row, &r, params).map_err(|e| {
                            LoadError::Record {
                                sequence: framed.sequence,
                                message: e.to_string(),
                            }
                        })?;
                    } else if r.intended_ns != intended_ns || r.route != route {
                        return Err(LoadError::Record {
                        sequence: framed.sequence,
                        message: format!(
                            "request {} says intended {} ns, route {}; the schedule says {intended_ns} ns, route {route}",
                            r.index, r.intended_ns, r.route
                        ),
                    });
                    }
                    if percentes_formats::journal::records::Outcome::from_byte(r.outcome).is_none()
                    {
                        return Err(LoadError::Record {
                            sequence: framed.sequence,
                            message: format!(
                                "request {} has outcome byte {}, which no version defines",
                                r.index, r.outcome
                            ),
                        });
                    }
                    requests.fill(row, &r);
                }
                Record::Event(e) => {
                    // A recorder's own cgroup seconds, kept with the journal that wrote them (a
                    // merged run's events are one timeline); a detail not in the form is skipped.
                    if e.is(EventKind::CgroupCpu)
                        && let Some(cpu) = CgroupCpu::parse(&e.detail)
                    {
                        telemetry.cgroup.push(CgroupRow {
                            shard: part,
                            at_ns: e.at_ns,
                            cpu,
                        });
                    }
                    events.rows.push(e)
                }
                Record::Telemetry(t) => telemetry.rows.push(t),
                Record::Scrape(s) => {
                    // The kind-7 rules a sum over a span needs (JOURNAL.md "7 scrape").
                    scrape_rules.check(&s).map_err(|broken| LoadError::Record {
                        sequence: framed.sequence,
                        message: format!("{broken}{}", shard_named(files, part)),
                    })?;
                    scrapes.push(s)
                }
                Record::RequestExtension(x) => {
                    // The same placement rules as a request record's: scheduled in this shard,
                    // at most once.
                    let row = placed(x.index, own, shard, requests.len()).ok_or_else(|| {
                        LoadError::Record {
                            sequence: framed.sequence,
                            message: unscheduled(
                                "request extension for index",
                                x.index,
                                own,
                                header.schedule_requests,
                                &shard_named(files, part),
                            ),
                        }
                    })?;
                    if std::mem::replace(&mut extended[row], true) {
                        return Err(LoadError::Record {
                            sequence: framed.sequence,
                            message: format!(
                                "request index {} has a second extension record{}",
                                x.index,
                                shard_named(files, part)
                            ),
                        });
                    }
                    requests.extend(row, &x);
                    if turns.is_follow_up(row) {
                        turns.note(row, &x);
                    }
                }
                Record::Stream(x) => {
                    let row = placed(x.index, own, shard, requests.len()).ok_or_else(|| {
                        LoadError::Record {
                            sequence: framed.sequence,
                            message: unscheduled(
                                "stream record for index",
                                x.index,
                                own,
                                header.schedule_requests,
                                &shard_named(files, part),
                            ),
                        }
                    })?;
                    stream_into(&mut requests, &mut streamed, row, &x, framed.sequence)?;
                }
                Record::Checkpoint(_) | Record::Seal(_) | Record::Unknown { .. } => {}
            }
        }
        telemetry.shards.push(telemetry_start..telemetry.rows.len());
    }
    streams_agree(&requests, &streamed)?;
    if files.len() > 1 {
        // One timeline: every shard's events by time (stable, so a shard's own order holds).
        events.rows.sort_by_key(|e| e.at_ns);
    }
    name_replicas_by_address(&mut requests, &config);
    let missing: Vec<u64> = (0..requests.len())
        .filter(|&row| requests.outcome[row] == NO_RECORD)
        .map(|row| requests.index[row])
        .collect();

    let mut not_publishable = not_publishable(&config, files, &parts);
    let sealed_completed = parts.iter().all(|report| {
        report
            .seal
            .as_ref()
            .is_some_and(|s| s.status == SealStatus::Completed.name())
    });
    turns.check(params, &requests, sealed_completed)?;
    let designs_reuse = params.prefixes.is_some() || params.history.is_some();
    let prefixes = designs_reuse.then(|| {
        let places = (0..requests.len())
            .map(|row| (turns.session(row, requests.index[row]), turns.turn(row)))
            .collect();
        prefixes::Prefixes::of(params, &requests, places)
    });
    if !missing.is_empty() {
        if sealed_completed {
            return Err(LoadError::Missing {
                count: missing.len(),
                first: missing[0],
            });
        }
        not_publishable.push(format!(
            "NOT PUBLISHABLE: {} scheduled requests have no record",
            missing.len()
        ));
    }
    Ok(Run {
        header,
        config,
        report,
        parts,
        requests,
        events,
        telemetry,
        scrapes,
        missing,
        not_publishable,
        manifest: None,
        vouched: None,
        prefixes,
    })
}

/// A kind-8 stream record into its row, once JOURNAL.md's rules for it hold: at most one a
/// row, and the record's own rules ([`StreamRecord::check`]).
fn stream_into(
    requests: &mut Requests,
    streamed: &mut Vec<Option<u64>>,
    row: usize,
    record: &StreamRecord,
    sequence: u64,
) -> Result<(), LoadError> {
    if streamed.is_empty() {
        streamed.resize(requests.len(), None);
    }
    if let Some(first) = streamed[row].replace(sequence) {
        return Err(LoadError::Record {
            sequence,
            message: format!(
                "request index {} has a second stream record (the first is record {first}; JOURNAL.md kind 8: at most one per index)",
                record.index
            ),
        });
    }
    record.check().map_err(|broken| LoadError::Record {
        sequence,
        message: format!(
            "the stream record of request index {} breaks JOURNAL.md's kind-8 rules: {broken}",
            record.index
        ),
    })?;
    requests.fill_stream(row, record).map_err(LoadError::Spill)
}

/// Every stream record against its request (JOURNAL.md kind 8): the request was dispatched, and
/// its output came between its dispatch and its terminal time.
fn streams_agree(requests: &Requests, streamed: &[Option<u64>]) -> Result<(), LoadError> {
    let Some(streams) = &requests.streams else {
        return Ok(());
    };
    for (row, sequence) in streamed.iter().enumerate() {
        let Some(sequence) = *sequence else {
            continue;
        };
        let dispatched = requests.dispatched_ns[row];
        let terminal = requests.terminal_ns[row];
        let (first, last) = (streams.first_ns[row], streams.last_ns[row]);
        let problem = if requests.outcome[row] == NO_RECORD {
            None
        } else if dispatched == NONE {
            Some("the request was never dispatched".to_owned())
        } else if first < dispatched || last > terminal {
            Some(format!(
                "its output ({first}-{last} ns) is not within the request's dispatch and terminal times ({dispatched}-{terminal} ns)"
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(LoadError::Record {
                sequence,
                message: format!(
                    "the stream record of request index {}: {problem} (JOURNAL.md kind 8)",
                    requests.index[row]
                ),
            });
        }
    }
    Ok(())
}

/// The first journal's verification report, header and configuration, once every journal
/// verified (sealed-intact or an unsealed prefix, with a header) and all share one
/// configuration and schedule.
fn verified_header(
    files: &[JournalFile],
    parts: &[VerifyReport],
) -> Result<(VerifyReport, Header, Config), LoadError> {
    for report in parts {
        match report.verdict {
            Verdict::SealedIntact | Verdict::UnsealedPrefix if report.header.is_some() => {}
            _ => return Err(LoadError::Unverified(Box::new(report.clone()))),
        }
    }
    if parts.len() != files.len() {
        return Err(LoadError::Schedule(ScheduleMismatch::Reports));
    }
    let Some(report) = parts.first().cloned() else {
        return Err(LoadError::Schedule(ScheduleMismatch::NoJournal));
    };
    let header = report
        .header
        .clone()
        .ok_or_else(|| LoadError::Unverified(Box::new(report.clone())))?;
    for other in &parts[1..] {
        let h = other.header.as_ref().expect("checked above");
        if h.config_hash != header.config_hash || h.schedule_digest != header.schedule_digest {
            return Err(LoadError::Schedule(ScheduleMismatch::ShardsDiffer));
        }
    }
    let config = Config::parse_journaled(&header.config_bytes).map_err(LoadError::Config)?;
    Ok((report, header, config))
}

/// The header's schedule, checked against the configuration in the same header and against
/// its own recorded digest.
fn schedule_of_its_config(header: &Header, config: &Config) -> Result<(), LoadError> {
    // The schedule, regenerated from the header's parameters, must match its recorded digest.
    let params = &header.schedule;
    // The header's schedule must be the one its own configuration defines: the analysis sizes
    // its windows and goodput series from it, and the configuration is what the pins bound.
    // The schedule rule is the recorder's, named in the header, not the configuration's.
    let mut expected = ScheduleParams {
        grid: params.grid,
        ..config.schedule_params()
    };
    // A replay's times are the trace's, which the header carries and the configuration names.
    if let (Workload::Replay { offsets_ns }, Workload::Replay { .. }) =
        (&params.workload, &expected.workload)
    {
        expected = expected.replaying(offsets_ns.to_vec());
    }
    if *params != expected {
        return Err(LoadError::Schedule(ScheduleMismatch::Parameters));
    }
    let digest = params.digest();
    if digest != header.schedule_digest {
        return Err(LoadError::Schedule(ScheduleMismatch::Digest {
            regenerated: digest,
            recorded: header.schedule_digest,
        }));
    }
    Ok(())
}

/// Why the run may not be published: its configuration's own reasons, and each journal that is
/// unsealed or was not sealed completed.
fn not_publishable(config: &Config, files: &[JournalFile], parts: &[VerifyReport]) -> Vec<String> {
    let mut not_publishable = Vec::new();
    if let Err(why) = config.publishability() {
        not_publishable.push(why.to_string());
    }
    for (part, report) in parts.iter().enumerate() {
        let named = shard_named(files, part);
        match (&report.seal, report.verdict) {
            (_, Verdict::UnsealedPrefix) => not_publishable.push(format!(
                "NOT PUBLISHABLE: the journal{named} is unsealed ({} records verify; it was cut off or the recorder crashed)",
                report.records
            )),
            (Some(seal), _) if seal.status != SealStatus::Completed.name() => not_publishable
                .push(format!(
                    "NOT PUBLISHABLE: the run{named} was {} ({})",
                    seal.status, seal.reason
                )),
            _ => {}
        }
    }
    not_publishable
}

/// A replica header that named an address (a router's upstream, `target.replica_header`) reads
/// as the replica `target.replica_addresses` gives that address: done once per distinct value,
/// and over the column only when one matches.
fn name_replicas_by_address(requests: &mut Requests, config: &Config) {
    let addresses = &config.target.replica_addresses;
    let renames: Vec<(u32, String)> = requests
        .replicas
        .values
        .iter()
        .enumerate()
        .filter_map(|(id, value)| {
            let (name, _) = addresses.iter().find(|(_, address)| *address == value)?;
            Some((id as u32, name.clone()))
        })
        .collect();
    for (from, name) in renames {
        let to = requests.replicas.id(&name);
        for id in requests.replica.iter_mut().filter(|id| **id == from) {
            *id = to;
        }
    }
}

/// `" (shard file PATH)"` when a run is loaded from more than one journal, else nothing.
/// Why a record's index has no row: outside the schedule, or (in a shard) another shard's.
fn unscheduled(what: &str, index: u64, own: (u64, u64), scheduled: u64, file: &str) -> String {
    if own.1 == 1 || index >= scheduled {
        format!("{what} {index} is not in the schedule ({scheduled} requests){file}")
    } else {
        format!(
            "{what} {index} is not scheduled in shard {} of {} (its indices are i mod {} = {}){file}",
            own.0, own.1, own.1, own.0
        )
    }
}

fn shard_named(files: &[JournalFile], part: usize) -> String {
    if files.len() > 1 {
        format!(" (shard file {})", files[part].path().display())
    } else {
        String::new()
    }
}

/// The sequence numbers of every record of request `index` (only for the duplicate error).
fn sequences_of(file: &JournalFile, report: &VerifyReport, index: u64) -> Vec<u64> {
    file.records(report)
        .filter_map(|(framed, decoded)| match decoded {
            Ok(Record::Request(r)) if r.index == index => Some(framed.sequence),
            _ => None,
        })
        .collect()
}

/// The row of schedule index `index` in a run loaded as shard `shard` (k, N), from a journal of
/// shard `own`: `None` when the index is not that journal's, not the run's, or past the schedule.
fn placed(index: u64, own: (u64, u64), shard: (u64, u64), rows: usize) -> Option<usize> {
    (index % own.1 == own.0 && index % shard.1 == shard.0)
        .then(|| usize::try_from(index / shard.1).ok())
        .flatten()
        .filter(|&row| row < rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_sizes_read_in_iec_units_and_a_bad_one_says_how_to_write_it() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(DEFAULT_TABLE_MEMORY));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        for (bad, kind) in [
            ("2GB", SizeErrorKind::Unit("GB".into())),
            ("two", SizeErrorKind::Unit("two".into())),
            ("GiB", SizeErrorKind::NotANumber),
            ("-1", SizeErrorKind::Unit("-1".into())),
            ("99999999TiB", SizeErrorKind::TooLarge),
        ] {
            let why = parse_size(bad).unwrap_err();
            assert_eq!(why.kind, kind, "{bad}");
            assert!(why.to_string().contains(bad), "{bad}: {why}");
        }
        let options = super::Options::default();
        assert!(!options.spills(14_000_000) && options.spills(15_000_000));
    }
    use percentes_formats::journal::records::{Record, RequestRecord};
    use percentes_formats::journal::synthetic::{self, Ending, Options};
    use percentes_formats::journal::JournalWriter;

    fn file(name: &str, bytes: &[u8]) -> JournalFile {
        // One name per test: two tests of one process writing one file race (a journal is
        // mapped while the other rewrites it).
        let dir = percentes_testkit::Scratch::new("load");
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        JournalFile::open(&path).unwrap()
    }

    /// A journal of the golden config whose requests are edited by `edit` before writing.
    fn edited(edit: impl Fn(&mut Vec<RequestRecord>)) -> Vec<u8> {
        let config = synthetic::golden_config();
        let header = synthetic::header(&config, None);
        let mut requests: Vec<RequestRecord> = header
            .schedule
            .iter()
            .map(|e| {
                let mut r = synthetic::request(e.index, 50, e.intended_ns);
                r.route = e.route;
                r
            })
            .collect();
        edit(&mut requests);
        let mut writer = JournalWriter::create(Vec::new(), &header, None).unwrap();
        for r in requests {
            writer.append(&Record::Request(r)).unwrap();
        }
        writer.seal(1, SealStatus::Completed, "").unwrap().0
    }

    #[test]
    fn a_golden_loads_with_every_index_once() {
        let run = load(&file("sealed.pj", &synthetic::small_sealed())).unwrap();
        assert_eq!(run.requests.len() as u64, run.header.schedule_requests);
        assert!(
            !run.requests.is_spilled(),
            "a small table stays on the heap"
        );
        assert!(run.requests.index.windows(2).all(|w| w[0] + 1 == w[1]));
        assert!(run.missing.is_empty());
        assert_eq!(
            run.not_publishable.len(),
            1,
            "dev profile only: {:?}",
            run.not_publishable
        );
        assert!(!run.telemetry.rows.is_empty() && !run.events.rows.is_empty());
    }

    /// A journal of the golden config with `extensions` written before its request records.
    fn extended(extensions: &[(u64, Vec<(u16, u64)>)]) -> Vec<u8> {
        use percentes_formats::journal::records::RequestExtension;
        let config = synthetic::golden_config();
        let header = synthetic::header(&config, None);
        let mut writer = JournalWriter::create(Vec::new(), &header, None).unwrap();
        for (index, fields) in extensions {
            let x = RequestExtension {
                index: *index,
                fields: fields.clone(),
            };
            writer.append(&Record::RequestExtension(x)).unwrap();
        }
        for e in header.schedule.iter() {
            let mut r = synthetic::request(e.index, 50, e.intended_ns);
            r.route = e.route;
            writer.append(&Record::Request(r)).unwrap();
        }
        writer.seal(1, SealStatus::Completed, "").unwrap().0
    }

    #[test]
    fn a_request_extension_fills_its_row_once_and_only_a_scheduled_one() {
        // Key 1 max-tokens, key 2 prompt-tokens, key 999 unknown to this build (skipped).
        let run = load(&file(
            "extended.pj",
            &extended(&[(3, vec![(1, 40), (2, 17), (999, 5)]), (5, vec![(1, 8)])]),
        ))
        .unwrap();
        let row = |index| run.requests.index.iter().position(|&i| i == index).unwrap();
        assert_eq!(run.requests.max_tokens[row(3)], 40);
        assert_eq!(run.requests.prompt_tokens_sent[row(3)], 17);
        assert_eq!(run.requests.max_tokens[row(5)], 8);
        assert_eq!(run.requests.prompt_tokens_sent[row(5)], u32::MAX);
        assert_eq!(run.requests.max_tokens[row(4)], u32::MAX, "no extension");
        let error = load(&file("twice.pj", &extended(&[(3, vec![]), (3, vec![])]))).unwrap_err();
        assert!(error.to_string().contains("second extension"), "{error}");
        let error = load(&file("stray.pj", &extended(&[(10_000, vec![(1, 8)])]))).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("request extension for index 10000 is not in the schedule"),
            "{error}"
        );
        // Verify, which does not decode bodies, counts it with the seal's `other`.
        let bytes = extended(&[(3, vec![(1, 40)])]);
        let report = percentes_formats::journal::verify::verify(&bytes, &Default::default());
        assert_eq!(
            report.verdict,
            percentes_formats::journal::Verdict::SealedIntact
        );
        assert_eq!(report.counts.other, 1);
    }

    #[test]
    fn duplicates_foreign_indices_and_schedule_disagreements_are_refused() {
        let error = load(&file(
            "dup.pj",
            &edited(|r| {
                let copy = r[3].clone();
                r.push(copy);
            }),
        ))
        .unwrap_err();
        assert!(error.to_string().contains("appears twice"), "{error}");
        let error = load(&file("foreign.pj", &edited(|r| r[0].index = 10_000))).unwrap_err();
        // An unsharded journal's error speaks of the schedule, not of a shard 0 of 1.
        assert!(
            error
                .to_string()
                .contains("is not in the schedule (33 requests)"),
            "{error}"
        );
        let error = load(&file("moved.pj", &edited(|r| r[2].intended_ns += 1))).unwrap_err();
        assert!(error.to_string().contains("the schedule says"), "{error}");
        // A header whose schedule disagrees with its own configuration (a crafted phase of any
        // length, its digest recomputed to match) is refused before anything is sized from it.
        let config = synthetic::golden_config();
        let mut header = synthetic::header(&config, None);
        header.schedule.phases[1].duration_ns *= 2;
        header.schedule_digest = header.schedule.digest();
        let writer = JournalWriter::create(Vec::new(), &header, None).unwrap();
        let crafted = writer.seal(1, SealStatus::Completed, "").unwrap().0;
        let error = load(&file("crafted.pj", &crafted)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("not the ones its configuration defines"),
            "{error}"
        );
        let error = load(&file(
            "missing.pj",
            &edited(|r| {
                r.remove(5);
            }),
        ))
        .unwrap_err();
        assert!(
            matches!(error, LoadError::Missing { count: 1, first: 5 }),
            "{error}"
        );
    }

    /// The golden journal with a stream record before each completed request (2 reasoning and
    /// 4 answer deltas), then `edit`ed.
    fn streamed(edit: impl FnOnce(&mut Vec<Record>)) -> Vec<u8> {
        let with = synthetic::with_streams(&synthetic::small_sealed(), (2, 4), 30_000_000);
        synthetic::with_records(&with, edit)
    }

    use synthetic::first_stream;

    /// Kind 8 loads into the stream columns, and each of JOURNAL.md's rules for it is a refusal
    /// naming the record and the rule.
    #[test]
    fn a_stream_record_fills_its_row_and_each_broken_rule_is_refused() {
        let run = load(&file("streamed.pj", &streamed(|_| {}))).unwrap();
        let streams = run.requests.streams.as_ref().expect("stream columns");
        let row = (0..run.requests.len())
            .find(|&r| streams.kinds[r] != 0)
            .unwrap();
        assert_eq!(streams.kinds_label(row), "answer+reasoning");
        assert_eq!(
            streams.first_answer_ns[row],
            run.requests.first_content_ns[row]
        );
        assert_eq!(
            streams.first_ns[row] + 30_000_000,
            streams.first_answer_ns[row]
        );
        assert_eq!((streams.reasoning_tokens[row], streams.deltas(row)), (2, 6));
        type Edit = fn(&mut Vec<Record>);
        let cases: [(&str, Edit, &str); 5] = [
            (
                "twice",
                |r| first_stream(r).kinds[1].kind = 1,
                "kind 1 is listed twice",
            ),
            (
                "gaps",
                |r| first_stream(r).deliveries[1].gap_us += 100_000,
                "its delivery gaps sum to",
            ),
            (
                "second",
                |r| {
                    let copy = first_stream(r).clone();
                    r.insert(0, Record::Stream(copy));
                },
                "has a second stream record",
            ),
            (
                "late",
                |r| {
                    // Every delta 40 s later: consistent within itself, after the terminal.
                    for tally in &mut first_stream(r).kinds {
                        tally.first_ns += 40_000_000_000;
                        tally.last_ns += 40_000_000_000;
                    }
                },
                "not within the request's dispatch and terminal times",
            ),
            (
                "stray",
                |r| first_stream(r).index = 1_000_000,
                "stream record for index 1000000 is not in the schedule",
            ),
        ];
        for (name, edit, says) in cases {
            let error = load(&file(&format!("{name}.pj"), &streamed(edit))).unwrap_err();
            let text = error.to_string();
            assert!(text.contains(says), "{name}: {text}");
            assert!(matches!(error, LoadError::Record { .. }), "{name}: {text}");
        }
    }

    #[test]
    fn unsealed_and_aborted_runs_load_but_are_not_publishable() {
        let config = synthetic::golden_config();
        let torn = synthetic::bytes(
            &config,
            &Options {
                ending: Ending::Torn { after_requests: 20 },
                ..Options::default()
            },
        );
        let run = load(&file("torn.pj", &torn)).unwrap();
        assert!(!run.missing.is_empty());
        assert!(
            run.not_publishable.iter().any(|w| w.contains("unsealed")),
            "{:?}",
            run.not_publishable
        );
        let aborted = synthetic::bytes(
            &config,
            &Options {
                ending: Ending::Aborted { after_requests: 10 },
                ..Options::default()
            },
        );
        let run = load(&file("aborted.pj", &aborted)).unwrap();
        assert!(
            run.not_publishable.iter().any(|w| w.contains("aborted")),
            "{:?}",
            run.not_publishable
        );
        let mut tampered = synthetic::small_sealed();
        let at = tampered.len() - 100;
        tampered[at] ^= 1;
        assert!(matches!(
            load(&file("tampered.pj", &tampered)),
            Err(LoadError::Unverified(_))
        ));
    }

    /// Chain-valid rewrites of the vLLM golden's scrape records (kind 7): one moved back in time
    /// (which once made `analyze` panic in the server evidence), or with another rule broken,
    /// is refused with its record and rule; a rewrite that breaks none is analyzed, never a panic.
    #[test]
    fn a_scrape_record_that_breaks_a_rule_is_refused_by_its_number() {
        use percentes_formats::journal::scrape::{Sample, ScrapeRecord};
        let golden = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../golden/runs/replica-loss-vllm-factor5.pj"
        ))
        .unwrap();
        let scrapes: Vec<usize> = {
            let mut at = Vec::new();
            synthetic::with_records(&golden, |records| {
                at = records
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| matches!(r, Record::Scrape(_)))
                    .map(|(i, _)| i)
                    .collect();
            });
            at
        };
        assert!(scrapes.len() > 1000, "{}", scrapes.len());
        let rewrite = |k: usize, edit: &dyn Fn(&mut ScrapeRecord)| {
            synthetic::with_records(&golden, |records| {
                if let Record::Scrape(s) = &mut records[scrapes[k]] {
                    edit(s);
                }
            })
        };
        let (mut refused, mut analyzed) = (0, 0);
        for k in (0..scrapes.len()).step_by(scrapes.len() / 24) {
            let bytes = rewrite(k, &|s| {
                s.sent_ns = s.sent_ns.saturating_sub(500_000_000);
                s.received_ns = s.received_ns.saturating_sub(500_000_000);
            });
            match load(&file("scrape-moved.pj", &bytes)) {
                Err(LoadError::Record { message, .. }) => {
                    assert!(message.contains("rule 1)"), "{message}");
                    refused += 1;
                }
                Err(e) => panic!("{e}"),
                Ok(run) => {
                    let f = file("scrape-moved.pj", &bytes);
                    let _ = crate::analysis::analyze(
                        &run,
                        &f,
                        percentes_formats::spec::Spec::CURRENT,
                        &Default::default(),
                    );
                    analyzed += 1;
                }
            }
        }
        assert!(refused >= 20, "{refused} refused, {analyzed} analyzed");
        type Edit = fn(&mut ScrapeRecord);
        let edits: [(u8, Edit); 3] = [
            (2, |s| s.first = !s.first),
            (4, |s| {
                s.samples.push(Sample {
                    id: 1_000_000,
                    value: 1.0,
                })
            }),
            (5, |s| s.gone.push(1_000_000)),
        ];
        for (rule, edit) in edits {
            let error = load(&file("broken.pj", &rewrite(40, &edit))).unwrap_err();
            assert!(
                error.to_string().contains(&format!("rule {rule})")),
                "{error}"
            );
        }
    }
}
