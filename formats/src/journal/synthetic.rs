//! Deterministic synthetic journals: goldens, corruption tests, benchmarks, analyzer fixtures.
//!
//! Every byte follows from the configuration and the options: the schedule comes from the config,
//! and each request's outcome and timings are drawn from a hash of its index. No clock, no host.
//! These journals exercise the format; they say nothing about any real service.

use std::io::Write;

use ed25519_dalek::SigningKey;

use super::records::{
    class_code, EventKind, EventRecord, Outcome, Record, RequestRecord, SealStatus, TelemetryRecord,
};
use super::writer::{JournalWriter, Sealed, WriteError};
use super::{ClockAnchors, Header, CODEC};
use crate::config::Config;
use crate::schedule::Entry;

/// The configuration the goldens are made from: a dev profile at a low rate, so a journal holds
/// a few dozen requests.
pub const GOLDEN_CONFIG: &str = r#"# Golden journals' configuration (formats::journal::synthetic). Do not edit: the goldens hash it.
schema_version = 1
profile = "dev"

[dev]
time_factor = 100

[target]
kind = "mock"
base_url = "http://127.0.0.1:8000"
model = "mock"
replicas = ["replica-0", "replica-1"]

[schedule]
seed = 20261130
arrival = "poisson"
rate_rps = 6.0

[fault]
variant = "none"

[[routes]]
label = "chat"
path = "/v1/chat/completions"
weight = 3

[[routes]]
label = "completions"
path = "/v1/completions"
weight = 1
"#;

/// How a synthetic journal ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Sealed `completed`.
    Sealed,
    /// Sealed as aborted after this many requests (an operator stop).
    Aborted {
        /// Requests written before the seal.
        after_requests: u64,
    },
    /// No seal: the writer stops after this many requests and the last block is cut in half.
    Torn {
        /// Requests written before the cut.
        after_requests: u64,
    },
}

/// Options for [`write()`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Content-event gaps per completed request.
    pub gaps_per_request: u32,
    /// Write a checkpoint after this many records.
    pub checkpoint_every_records: u64,
    /// Block payload target in bytes (small blocks give corruption tests many boundaries).
    pub block_target_bytes: usize,
    /// How the journal ends.
    pub ending: Ending,
    /// Signs the checkpoints and the seal when set.
    pub signer: Option<SigningKey>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            gaps_per_request: 8,
            checkpoint_every_records: 16,
            block_target_bytes: 1024,
            ending: Ending::Sealed,
            signer: None,
        }
    }
}

/// The signing key of the signed golden, from a fixed seed (never use it for anything real).
pub fn golden_signing_key() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

/// The header a synthetic journal carries for `config`.
pub fn header(config: &Config, signer: Option<&SigningKey>) -> Header {
    let mut schedule = config.schedule_params();
    // Rule 1, as golden/v1's journals were written: the writer must keep reproducing their bytes.
    // (The recorder writes rule 2; the formats and recorder tests cover it.)
    schedule.grid = crate::schedule::Grid::PerPhase;
    Header {
        codec: CODEC.into(),
        // Fixed, not the current version: golden/v1's journals were written with it, and the
        // writer must keep reproducing their bytes whatever version is current.
        spec_version: crate::spec::Spec::V0_2.name().into(),
        tool_version: "synthetic".into(),
        tool_commit: "none".into(),
        profile: config.profile.name().into(),
        dev_time_factor: config.time_factor,
        config_hash: config.hash(),
        config_bytes: config.raw_bytes().to_vec(),
        schedule_requests: schedule.iter().count() as u64,
        schedule_digest: schedule.digest(),
        schedule,
        clock: ClockAnchors {
            monotonic_epoch_ns: 1_000_000_000,
            realtime_epoch_ns: 1_796_000_000_000_000_000,
            source: "synthetic".into(),
        },
        host: vec![("generator".into(), "formats::journal::synthetic".into())],
        shard_index: 0,
        shard_count: 1,
        signing_key: signer.map(|k| k.verifying_key().to_bytes()),
        extensions: Vec::new(),
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A request record for `index`, dispatched at `intended_ns`; `outcome_roll` 0..100 picks the
/// outcome (0..=3 errored, 4..=5 censored, else completed).
pub fn request(index: u64, outcome_roll: u64, intended_ns: u64) -> RequestRecord {
    request_with_gaps(index, outcome_roll, intended_ns, 8)
}

fn request_with_gaps(index: u64, outcome_roll: u64, intended_ns: u64, gaps: u32) -> RequestRecord {
    let h = mix(index ^ 0x5eed);
    let skew = 20_000 + h % 200_000;
    let dispatched = intended_ns + skew;
    let ttft = 40_000_000 + (h >> 8) % 400_000_000;
    let gap_us: Vec<u32> = (0..gaps)
        .map(|g| 1 + (mix(h ^ u64::from(g)) % 40_000) as u32)
        .collect();
    let stream_ns: u64 = gap_us.iter().map(|&g| u64::from(g) * 1000).sum();
    let (outcome, class, terminal, status, detail, gaps_kept) = match outcome_roll {
        0..=3 => (
            Outcome::Errored,
            "reset",
            dispatched + ttft / 2,
            200,
            "connection reset by peer",
            Vec::new(),
        ),
        4..=5 => (
            Outcome::Censored,
            "timeout",
            intended_ns + 30_000_000_000,
            200,
            "deadline 30 s",
            Vec::new(),
        ),
        _ => (
            Outcome::Completed,
            "correct-success",
            dispatched + ttft + stream_ns,
            200,
            "",
            gap_us,
        ),
    };
    let completed = outcome == Outcome::Completed;
    RequestRecord {
        index,
        outcome: outcome as u8,
        class: class_code(class).expect("synthetic classes exist"),
        route: h.is_multiple_of(4) as u32,
        intended_ns,
        dispatched_ns: Some(dispatched),
        connect_start_ns: Some(dispatched),
        connect_end_ns: Some(dispatched + 80_000),
        tls_done_ns: None,
        request_written_ns: Some(dispatched + 120_000),
        response_head_ns: Some(dispatched + ttft - 1_000),
        first_content_ns: (outcome != Outcome::Errored).then_some(dispatched + ttft),
        terminal_ns: terminal,
        content_events: if completed { gaps + 1 } else { 0 },
        content_gaps_us: gaps_kept,
        http_status: status,
        bytes_sent: 512,
        bytes_received: if completed {
            200 + 90 * u64::from(gaps)
        } else {
            120
        },
        usage_prompt_tokens: completed.then_some(128),
        usage_completion_tokens: completed.then_some(gaps + 1),
        replica: format!("replica-{}", h % 2),
        connection_id: h % 16,
        connection_reused: index >= 16,
        detail: detail.into(),
    }
}

/// A telemetry sample for the second ending at `at_ns` that passes every client gate: host CPU
/// 10-30 %, stall p99 40-100 us.
pub fn telemetry_at(at_ns: u64) -> TelemetryRecord {
    let h = mix(at_ns);
    TelemetryRecord {
        at_ns,
        interval_ns: 1_000_000_000,
        host_cpu_busy_ppm: 100_000 + (h % 200_000) as u32,
        recorder_cpu_ns: 2_000_000 + h % 1_000_000,
        stall_p99_ns: 40_000 + h % 60_000,
        stall_max_ns: 200_000 + h % 300_000,
        stall_samples: 10_000,
        skew_count: 6,
        skew_p50_ns: 60_000,
        skew_p99_ns: 210_000,
        skew_max_ns: 220_000,
        undispatched_total: 0,
        in_flight: 3,
        writer_queue_depth: 1,
        writer_queue_max: 4,
    }
}

/// A completed request with exact timings, for analyzer oracles: dispatched `skew_ns` after t_i,
/// first content at `ttft_ns` and done at `e2e_ns` from t_i, with `gaps_us` between content events.
pub fn completed(
    entry: &Entry,
    skew_ns: u64,
    ttft_ns: u64,
    e2e_ns: u64,
    gaps_us: Vec<u32>,
) -> RequestRecord {
    let t = entry.intended_ns;
    RequestRecord {
        index: entry.index,
        outcome: Outcome::Completed as u8,
        class: 0,
        route: entry.route,
        intended_ns: t,
        dispatched_ns: Some(t + skew_ns),
        connect_start_ns: None,
        connect_end_ns: None,
        tls_done_ns: None,
        request_written_ns: Some(t + skew_ns),
        response_head_ns: Some(t + ttft_ns),
        first_content_ns: Some(t + ttft_ns),
        terminal_ns: t + e2e_ns,
        content_events: gaps_us.len() as u32 + 1,
        content_gaps_us: gaps_us,
        http_status: 200,
        bytes_sent: 300,
        bytes_received: 900,
        usage_prompt_tokens: Some(128),
        usage_completion_tokens: Some(256),
        replica: "replica-0".into(),
        connection_id: entry.index % 8,
        connection_reused: true,
        detail: String::new(),
    }
}

/// A request that ended without completing: `class` by name (e.g. `reset`, `timeout`), at
/// `after_ns` from t_i.
pub fn ended(entry: &Entry, class: &str, after_ns: u64) -> RequestRecord {
    let code = class_code(class).expect("a known class name");
    let outcome = super::records::CLASSES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, _, o)| *o)
        .expect("every class has an outcome");
    let mut r = completed(entry, 50_000, after_ns, after_ns, Vec::new());
    r.outcome = outcome as u8;
    r.class = code;
    r.first_content_ns = None;
    r.content_events = 0;
    r.response_head_ns = None;
    r.http_status = 0;
    if outcome == Outcome::Undispatched {
        r.dispatched_ns = None;
        r.request_written_ns = None;
        r.terminal_ns = entry.intended_ns;
    }
    r.detail = class.into();
    r
}

/// A journal scripted record by record, for analyzer oracles: `request` gives each scheduled
/// entry's record (`None` leaves it out), and `events` and `telemetry` are interleaved by time.
/// Sealed with `status`; checkpoints every 64 records.
pub fn scripted(
    config: &Config,
    request: &dyn Fn(&Entry) -> Option<RequestRecord>,
    events: Vec<EventRecord>,
    telemetry: Vec<TelemetryRecord>,
    status: SealStatus,
) -> Vec<u8> {
    // The scripted telemetry's stall readings stand for the workers' own tickers (SPEC §2), as a
    // recorder since issue 32 journals them; v0.4 reads G2.4 only from such a journal.
    let placement = (
        crate::journal::header::HostFact::Placement.key().to_owned(),
        "synthetic: the scripted stall readings are each worker's own ticker".to_owned(),
    );
    scripted_with_host(config, request, events, telemetry, status, vec![placement])
}

/// [`scripted`] with `host` facts of the caller's choosing beside the generator's: an empty list
/// stands for a recorder before issue 32, with no `placement` fact.
pub fn scripted_with_host(
    config: &Config,
    request: &dyn Fn(&Entry) -> Option<RequestRecord>,
    events: Vec<EventRecord>,
    telemetry: Vec<TelemetryRecord>,
    status: SealStatus,
    host: Vec<(String, String)>,
) -> Vec<u8> {
    scripted_with_scrapes(
        config,
        request,
        (events, telemetry, Vec::new()),
        status,
        host,
    )
}

/// The timed records a scripted journal interleaves with its requests, in time order (events
/// first at a tie, then telemetry, then scrapes, as they were always written).
fn timed_records(
    mut events: Vec<EventRecord>,
    mut telemetry: Vec<TelemetryRecord>,
    scrapes: Vec<super::scrape::ScrapeRecord>,
) -> Vec<(u64, Record)> {
    events.sort_by_key(|e| e.at_ns);
    telemetry.sort_by_key(|t| t.at_ns);
    let mut timed: Vec<(u64, Record)> = events
        .into_iter()
        .map(|e| (e.at_ns, Record::Event(e)))
        .chain(
            telemetry
                .into_iter()
                .map(|t| (t.at_ns, Record::Telemetry(t))),
        )
        .chain(
            scrapes
                .into_iter()
                .map(|s| (s.received_ns, Record::Scrape(s))),
        )
        .collect();
    timed.sort_by_key(|(at, _)| *at);
    timed
}

/// [`scripted_with_host`] with scrape records of the caller's making (`scrape::Scraper`), each
/// journaled at its answer's time.
pub fn scripted_with_scrapes(
    config: &Config,
    request: &dyn Fn(&Entry) -> Option<RequestRecord>,
    (events, telemetry, scrapes): (
        Vec<EventRecord>,
        Vec<TelemetryRecord>,
        Vec<super::scrape::ScrapeRecord>,
    ),
    status: SealStatus,
    host: Vec<(String, String)>,
) -> Vec<u8> {
    let mut header = header(config, None);
    header.host.extend(host);
    let params = header.schedule.clone();
    let mut writer = JournalWriter::create(Vec::new(), &header, None)
        .expect("a synthetic header is valid")
        .with_block_target(16 * 1024);
    let timed = timed_records(events, telemetry, scrapes);
    let mut timed = timed.into_iter().peekable();
    let mut count = 0u64;
    let mut last = 0u64;
    let mut append = |writer: &mut JournalWriter<Vec<u8>>, record: &Record, at: u64| {
        writer.append(record).expect("synthetic records fit");
        count += 1;
        if count.is_multiple_of(64) {
            writer.checkpoint(at).expect("checkpoint");
        }
    };
    for entry in params.iter() {
        while let Some((at, _)) = timed.peek() {
            if *at > entry.intended_ns {
                break;
            }
            let (at, record) = timed.next().expect("peeked");
            append(&mut writer, &record, at);
        }
        if let Some(record) = request(&entry) {
            append(&mut writer, &Record::Request(record), entry.intended_ns);
        }
        last = entry.intended_ns;
    }
    for (at, record) in timed {
        append(&mut writer, &record, at);
        last = last.max(at);
    }
    writer
        .seal(
            last + 1,
            status,
            if status == SealStatus::Completed {
                ""
            } else {
                "scripted"
            },
        )
        .expect("seal")
        .0
}

/// Writes a synthetic journal for `config` to `out`. Returns the seal summary when sealed.
pub fn write<W: Write>(
    out: W,
    config: &Config,
    options: &Options,
) -> Result<Option<Sealed>, WriteError> {
    let header = header(config, options.signer.as_ref());
    let params = header.schedule.clone();
    let mut writer = JournalWriter::create(out, &header, options.signer.clone())?
        .with_block_target(options.block_target_bytes);
    let limit = match options.ending {
        Ending::Sealed => u64::MAX,
        Ending::Aborted { after_requests } | Ending::Torn { after_requests } => after_requests,
    };
    let mut since_checkpoint = 0u64;
    let mut last_phase = u32::MAX;
    let mut next_telemetry_ns = 1_000_000_000u64;
    let mut last_ns = 0u64;
    for entry in params
        .iter()
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
    {
        let mut extra = Vec::new();
        if entry.phase != last_phase {
            last_phase = entry.phase;
            extra.push(Record::Event(EventRecord {
                at_ns: entry.intended_ns,
                kind: EventKind::Phase.code(),
                subject: params.phases[entry.phase as usize].name.clone(),
                detail: "phase start".into(),
                value: None,
            }));
        }
        while entry.intended_ns >= next_telemetry_ns {
            extra.push(Record::Telemetry(telemetry_at(next_telemetry_ns)));
            next_telemetry_ns += 1_000_000_000;
        }
        let roll = mix(entry.index.wrapping_mul(31).wrapping_add(params.seed)) % 100;
        let mut record = request_with_gaps(
            entry.index,
            roll,
            entry.intended_ns,
            options.gaps_per_request,
        );
        record.route = entry.route;
        extra.push(Record::Request(record));
        for record in extra {
            writer.append(&record)?;
            since_checkpoint += 1;
            if since_checkpoint >= options.checkpoint_every_records {
                writer.checkpoint(entry.intended_ns)?;
                since_checkpoint = 0;
            }
        }
        last_ns = entry.intended_ns;
    }
    let end_ns = last_ns + 30_000_000_000;
    match options.ending {
        Ending::Sealed => writer
            .seal(end_ns, SealStatus::Completed, "")
            .map(|(_, s)| Some(s)),
        Ending::Aborted { .. } => writer
            .seal(
                end_ns,
                SealStatus::Aborted,
                "operator stop (SIGINT) after dispatch was stopped",
            )
            .map(|(_, s)| Some(s)),
        Ending::Torn { .. } => {
            writer.commit()?;
            let _ = writer.into_inner_unsealed();
            Ok(None)
        }
    }
}

/// A journal in memory; for [`Ending::Torn`] the last block is cut in half.
pub fn bytes(config: &Config, options: &Options) -> Vec<u8> {
    let mut out = Vec::new();
    write(&mut out, config, options).expect("writing to memory cannot fail for a valid config");
    if let Ending::Torn { .. } = options.ending {
        // Find the last block's start by verifying, then cut the file inside that block.
        let report = super::verify::verify(&out, &Default::default());
        let header_len = report
            .header
            .as_ref()
            .map(|h| h.encode().len())
            .unwrap_or(0);
        let mut starts = Vec::new();
        let mut pos = header_len;
        while pos + super::BLOCK_PREFIX_BYTES <= out.len() {
            starts.push(pos);
            let len =
                u32::from_le_bytes(out[pos + 4..pos + 8].try_into().expect("4 bytes")) as usize;
            pos += super::BLOCK_PREFIX_BYTES + len + super::HASH_BYTES;
        }
        let last = *starts.last().unwrap_or(&header_len);
        let cut = last + (out.len() - last) / 2;
        out.truncate(cut);
    }
    out
}

/// The golden configuration, loaded.
pub fn golden_config() -> Config {
    Config::parse(GOLDEN_CONFIG.as_bytes()).expect("the golden config is valid")
}

/// A small sealed journal (the doc examples and quick tests use it).
pub fn small_sealed() -> Vec<u8> {
    bytes(&golden_config(), &Options::default())
}

/// A sealed journal's records, decoded, with its header (what [`split`] and [`join`] rewrite).
fn read_sealed(bytes: &[u8]) -> (Header, Vec<Record>, SealStatus, String, u64) {
    let report = super::verify::verify(bytes, &Default::default());
    let header = report.header.clone().expect("a journal with a header");
    let (_, header_end, _) = Header::decode(bytes).expect("the header decodes");
    let mut records = Vec::new();
    let mut seal = (SealStatus::Completed, String::new(), 0);
    for framed in super::verify::records(bytes, header_end, report.verified_bytes as usize) {
        match Record::decode(framed.kind, framed.body).expect("records decode") {
            Record::Seal(s) => {
                seal = (
                    SealStatus::from_byte(s.body.status).expect("a known seal"),
                    s.body.reason,
                    s.body.at_ns,
                )
            }
            Record::Checkpoint(_) => {}
            record => records.push(record),
        }
    }
    (header, records, seal.0, seal.1, seal.2)
}

fn write_records(header: &Header, records: &[&Record], seal: (SealStatus, &str, u64)) -> Vec<u8> {
    let mut writer = JournalWriter::create(Vec::new(), header, None).expect("a header encodes");
    for record in records {
        writer.append(record).expect("in memory");
    }
    writer.seal(seal.2, seal.0, seal.1).expect("in memory").0
}

/// A sealed journal written again with `edit` applied to its header and, when given, another
/// seal status and reason; the chain is computed anew, so the edit is the only thing wrong with
/// it. Tests craft with it what damage alone cannot make: a header that hashes but breaks a rule
/// (a key twice), a completed seal that gives a reason. Panics on a journal that is not
/// sealed-intact (a fixture's tool).
pub fn rewritten(
    bytes: &[u8],
    edit: impl FnOnce(&mut Header),
    seal: Option<(SealStatus, &str)>,
) -> Vec<u8> {
    let (mut header, records, status, reason, at_ns) = read_sealed(bytes);
    edit(&mut header);
    let (status, reason) = seal.unwrap_or((status, reason.as_str()));
    let all: Vec<&Record> = records.iter().collect();
    write_records(&header, &all, (status, reason, at_ns))
}

/// A sealed journal written again with `edit` applied to its records (the chain computed anew,
/// so the edit is the only thing wrong with it): tests craft a follow-up moved in time or
/// dropped with it. Panics on a journal that is not sealed-intact (a fixture's tool).
pub fn with_records(bytes: &[u8], edit: impl FnOnce(&mut Vec<Record>)) -> Vec<u8> {
    let (header, mut records, status, reason, at_ns) = read_sealed(bytes);
    edit(&mut records);
    let all: Vec<&Record> = records.iter().collect();
    write_records(&header, &all, (status, reason.as_str(), at_ns))
}

/// The first stream record (kind 8) among `records`, to edit in a test that crafts a rule's
/// break. Panics when there is none (a fixture's tool).
pub fn first_stream(records: &mut [Record]) -> &mut super::stream::StreamRecord {
    records
        .iter_mut()
        .find_map(|r| match r {
            Record::Stream(s) => Some(s),
            _ => None,
        })
        .expect("a stream record")
}

/// A stream record (kind 8) that agrees with `request`: `reasoning` reasoning deltas and then
/// `answer` answer deltas, the first `lead_ns` before the request's first content event (which
/// stays its first answer delta, so the request record keeps its meaning), the last at its
/// terminal time, evenly spaced, each its own delivery; `None` for a request with no first
/// content. (Tests and goldens of A4's readings, with hand-computable figures.)
pub fn stream_for(
    request: &RequestRecord,
    (reasoning, answer): (u32, u32),
    lead_ns: u64,
) -> Option<super::stream::StreamRecord> {
    use super::stream::{Delivery, KindTally, OutputKind, StreamRecord};
    let first_answer = request.first_content_ns?;
    let start = first_answer.checked_sub(lead_ns)?;
    let mut kinds = Vec::new();
    let mut times = Vec::new();
    if reasoning > 0 {
        // Reasoning from `start`, its last delta one step before the first answer.
        let step = lead_ns / u64::from(reasoning);
        let at: Vec<u64> = (0..u64::from(reasoning))
            .map(|k| start + k * step)
            .collect();
        kinds.push(KindTally {
            kind: OutputKind::Reasoning as u8,
            first_ns: at[0],
            last_ns: *at.last()?,
            deltas: reasoning,
        });
        times.extend(at);
    }
    if answer > 0 {
        let span = request.terminal_ns.checked_sub(first_answer)?;
        let step = if answer > 1 {
            span / u64::from(answer - 1)
        } else {
            0
        };
        let at: Vec<u64> = (0..u64::from(answer))
            .map(|k| first_answer + k * step)
            .collect();
        kinds.push(KindTally {
            kind: OutputKind::Answer as u8,
            first_ns: at[0],
            last_ns: *at.last()?,
            deltas: answer,
        });
        times.extend(at);
    }
    let mut deliveries = Vec::new();
    let mut previous: Option<u64> = None;
    for &t in &times {
        match previous {
            Some(p) if p == t => {
                if let Some(d) = deliveries.last_mut() {
                    let d: &mut Delivery = d;
                    d.deltas += 1;
                }
            }
            _ => {
                let gap_us =
                    previous.map_or(0, |p| ((t - p) / 1000).clamp(1, u64::from(u32::MAX)) as u32);
                deliveries.push(Delivery { gap_us, deltas: 1 });
            }
        }
        previous = Some(t);
    }
    let deliveries_total = deliveries.len() as u32;
    Some(StreamRecord {
        index: request.index,
        kinds,
        reasoning_tokens: (reasoning > 0).then_some(reasoning),
        deliveries,
        deliveries_total,
    })
}

/// A sealed journal with a stream record from [`stream_for`] written before each of its
/// completed requests' records.
pub fn with_streams(bytes: &[u8], counts: (u32, u32), lead_ns: u64) -> Vec<u8> {
    with_records(bytes, |records| {
        let mut out = Vec::with_capacity(records.len() * 2);
        for record in records.drain(..) {
            if let Record::Request(r) = &record {
                if r.outcome == Outcome::Completed as u8 {
                    out.extend(stream_for(r, counts, lead_ns).map(Record::Stream));
                }
            }
            out.push(record);
        }
        *records = out;
    })
}

/// One sealed journal rewritten as `count` shard journals of the same schedule, as `count`
/// recorders started at one epoch on one host would have written them: shard k holds the
/// requests with index mod count = k; shard 0, the coordinator, holds every event and telemetry
/// record. Each shard has the original's seal. (Tests: a merge of these must analyze exactly as
/// the original does.) Panics on a journal that is not sealed-intact: it is a test fixture's
/// tool, never applied to a journal from outside.
pub fn split(bytes: &[u8], count: u32) -> Vec<Vec<u8>> {
    let (header, records, status, reason, at_ns) = read_sealed(bytes);
    (0..count)
        .map(|k| {
            let mut shard = header.clone();
            shard.shard_index = k;
            shard.shard_count = count;
            shard.signing_key = None;
            shard
                .host
                .retain(|(key, _)| key != super::header::HostFact::BootId.key());
            shard.host.push((
                super::header::HostFact::BootId.key().into(),
                "synthetic-split".into(),
            ));
            // Every shard was ready on time.
            shard
                .host
                .retain(|(key, _)| key != super::header::HostFact::StartLateNs.key());
            shard.host.push((
                super::header::HostFact::StartLateNs.key().into(),
                "0".into(),
            ));
            let mine: Vec<&Record> = records
                .iter()
                .filter(|r| match r {
                    Record::Request(r) => r.index % u64::from(count) == u64::from(k),
                    // A request's own records go with it.
                    Record::RequestExtension(x) => x.index % u64::from(count) == u64::from(k),
                    Record::Stream(x) => x.index % u64::from(count) == u64::from(k),
                    _ => k == 0,
                })
                .collect();
            write_records(&shard, &mine, (status, &reason, at_ns))
        })
        .collect()
}

/// Shard journals rewritten as one journal of the whole schedule holding all their records:
/// shard 0's header as shard 0 of 1, every request with its extension and stream records, then
/// every event by time, then each shard's telemetry and scrapes in turn; shard 0's seal. (Tests: what one recorder would have written for the same
/// records.) Panics, as [`split`] does, on a shard that is not sealed-intact.
pub fn join(shards: &[&[u8]]) -> Vec<u8> {
    let read: Vec<_> = shards.iter().map(|b| read_sealed(b)).collect();
    let mut header = read[0].0.clone();
    header.shard_index = 0;
    header.shard_count = 1;
    let of = |kind: fn(&Record) -> bool| -> Vec<&Record> {
        read.iter()
            .flat_map(|(_, records, ..)| records.iter().filter(|r| kind(r)))
            .collect()
    };
    let mut records = of(|r| {
        matches!(
            r,
            Record::Request(_) | Record::RequestExtension(_) | Record::Stream(_)
        )
    });
    let mut events = of(|r| matches!(r, Record::Event(_)));
    events.sort_by_key(|r| match r {
        Record::Event(e) => e.at_ns,
        _ => 0,
    });
    records.extend(events);
    records.extend(of(|r| matches!(r, Record::Telemetry(_))));
    records.extend(of(|r| matches!(r, Record::Scrape(_))));
    let (_, _, status, reason, at_ns) = &read[0];
    write_records(&header, &records, (*status, reason, *at_ns))
}
