//! Record bodies: the frozen v1 wire structs, encoded with bincode 2.0.1 ([`super::CODEC`]).
//!
//! Field order is the byte order (JOURNAL.md §Records). These are wire types: the analyzer maps
//! them into its own domain types rather than computing on them directly. New kinds get new kind
//! bytes; a reader passes over kinds it does not know.

use std::collections::BTreeMap;

use bincode::{Decode, Encode};
use serde::{Serialize, Serializer};

use super::{codec, RECORD_BYTES_MAX};

/// The kind byte in front of each record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// One scheduled request's record.
    Request = 1,
    /// An event (fault, probe, phase, timeline, ...).
    Event = 2,
    /// A telemetry interval.
    Telemetry = 3,
    /// A checkpoint: always alone in its block.
    Checkpoint = 4,
    /// The seal: the last record.
    Seal = 5,
    /// Fields a request record gained after v1's first release, for the request of the same
    /// index; counted with `other` in the seal, so a reader that predates it verifies and skips it.
    RequestExtension = 6,
    /// One answered scrape of a server's metrics endpoint (SPEC §2 server-side evidence);
    /// counted with `other` in the seal, as kind 6.
    Scrape = 7,
    /// How a response's generated output arrived, by kind and delivery (SPEC §3, A4); counted
    /// with `other` in the seal, as kind 6.
    Stream = 8,
}

impl RecordKind {
    /// The kind with this byte.
    pub fn from_byte(byte: u8) -> Option<RecordKind> {
        Some(match byte {
            1 => RecordKind::Request,
            2 => RecordKind::Event,
            3 => RecordKind::Telemetry,
            4 => RecordKind::Checkpoint,
            5 => RecordKind::Seal,
            6 => RecordKind::RequestExtension,
            7 => RecordKind::Scrape,
            8 => RecordKind::Stream,
            _ => return None,
        })
    }
    /// Its name in `inspect` output.
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Request => "request",
            RecordKind::Event => "event",
            RecordKind::Telemetry => "telemetry",
            RecordKind::Checkpoint => "checkpoint",
            RecordKind::Seal => "seal",
            RecordKind::RequestExtension => "request-extension",
            RecordKind::Scrape => "scrape",
            RecordKind::Stream => "stream",
        }
    }
}

/// A request's terminal state (SPEC §3), plus the client-side failure of never being sent (§2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// It completed: latency = completion - t_i.
    Completed = 0,
    /// It failed explicitly (5xx, reset, malformed stream), at its failure time.
    Errored = 1,
    /// No terminal event by the timeout or run end: a lower bound, not a duration.
    Censored = 2,
    /// Scheduled but never dispatched: not an outcome of the target, a failure of the run (§2).
    Undispatched = 3,
}

impl Outcome {
    /// The outcome with this byte.
    pub fn from_byte(byte: u8) -> Option<Outcome> {
        Some(match byte {
            0 => Outcome::Completed,
            1 => Outcome::Errored,
            2 => Outcome::Censored,
            3 => Outcome::Undispatched,
            _ => return None,
        })
    }
    /// Its name in reports and exports.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Errored => "errored",
            Outcome::Censored => "censored",
            Outcome::Undispatched => "undispatched",
        }
    }
}

/// The subject of the `escape` event the recorder's fall-behind policy journals (SPEC §2
/// "Falling behind"): the client fell behind its schedule, not a declared trigger.
pub const CLIENT_BEHIND: &str = "client-behind";

/// The subject of the `escape` event a recorder journals when its fault's impact was not
/// confirmed within the pinned time of the fire, or its injector failed (seeds/004: abort when
/// impact cannot be confirmed; SPEC §10 fault fidelity).
pub const IMPACT_UNCONFIRMED: &str = "impact-unconfirmed";

/// The subject of the `escape` event a recorder journals at T_inject, instead of firing, when the
/// baseline it has just recorded fails a health gate it can judge (G6 goodput, G7 waiting queue,
/// G1 share; seeds/004: abort when baseline is unhealthy; SPEC §10).
pub const BASELINE_UNHEALTHY: &str = "baseline-unhealthy";

/// The subject of the `escape` event a recorder journals when, before the fire, a replica's
/// waiting-queue gauge that it had read goes unread for the pinned `fault.telemetry_gap_max_s`
/// (seeds/004: abort when required telemetry disappears; SPEC §10).
pub const TELEMETRY_MISSING: &str = "telemetry-missing";

/// The recorder's own aborts: escapes that judge the experiment unfit (the client, the fault, the
/// baseline, the telemetry), not declared abort triggers. The containment gate does not count
/// them; the client gate and fault fidelity fail the run for them.
pub const RECORDER_ABORTS: [&str; 4] = [
    CLIENT_BEHIND,
    IMPACT_UNCONFIRMED,
    BASELINE_UNHEALTHY,
    TELEMETRY_MISSING,
];

/// The subjects of `timeline` events (formats/JOURNAL.md): one type for the controller that
/// writes them and the analyzer that reads them, so neither matches the other's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineSubject {
    /// The service's first detection signal (its endpoint removed, say).
    Detected,
    /// The victim rescheduled (recovery decomposition).
    Reschedule,
    /// The replacement's process started (recovery decomposition).
    ContainerStart,
    /// The replacement's weights loaded (recovery decomposition).
    WeightLoad,
    /// The replacement's CUDA graphs captured (recovery decomposition).
    GraphCapture,
    /// The node monitor's grace period, value in seconds (black-hole, §1).
    NodeMonitorGrace,
    /// The replacement could not be started (the detail says why).
    RestartFailed,
    /// A note from the orchestrator that fits no boundary.
    Orchestrator,
}

impl TimelineSubject {
    /// Every subject.
    pub const ALL: [TimelineSubject; 8] = [
        TimelineSubject::Detected,
        TimelineSubject::Reschedule,
        TimelineSubject::ContainerStart,
        TimelineSubject::WeightLoad,
        TimelineSubject::GraphCapture,
        TimelineSubject::NodeMonitorGrace,
        TimelineSubject::RestartFailed,
        TimelineSubject::Orchestrator,
    ];

    /// Its name in the journal.
    pub fn name(self) -> &'static str {
        match self {
            TimelineSubject::Detected => "detected",
            TimelineSubject::Reschedule => "reschedule",
            TimelineSubject::ContainerStart => "container-start",
            TimelineSubject::WeightLoad => "weight-load",
            TimelineSubject::GraphCapture => "graph-capture",
            TimelineSubject::NodeMonitorGrace => "node-monitor-grace",
            TimelineSubject::RestartFailed => "restart-failed",
            TimelineSubject::Orchestrator => "orchestrator",
        }
    }

    /// The subject a journal names, if this build knows it.
    pub fn parse(name: &str) -> Option<TimelineSubject> {
        TimelineSubject::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The subject of the `pool` event a recorder writes once after the run.
pub const POOL_SUBJECT: &str = "connections";

/// What the connection pool did that no request record shows: a `pool` event's detail
/// (`opened_ahead=N expired=E found_closed=F`, formats/JOURNAL.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Connections opened ahead of need: the warm pool before the epoch and the spare keeper's.
    pub opened_ahead: u64,
    /// Idle connections retired at their idle limit.
    pub expired: u64,
    /// Idle connections found closed by the server, and replaced, before a send.
    pub found_closed: u64,
}

impl PoolCounts {
    /// The event's detail.
    pub fn detail(&self) -> String {
        format!(
            "opened_ahead={} expired={} found_closed={}",
            self.opened_ahead, self.expired, self.found_closed
        )
    }

    /// The counts of a detail in [`PoolCounts::detail`]'s form; `None` for any other text.
    pub fn parse(detail: &str) -> Option<PoolCounts> {
        let mut fields = detail.split(' ');
        let mut next = |key: &str| {
            fields
                .next()?
                .strip_prefix(key)?
                .strip_prefix('=')?
                .parse::<u64>()
                .ok()
        };
        let counts = PoolCounts {
            opened_ahead: next("opened_ahead")?,
            expired: next("expired")?,
            found_closed: next("found_closed")?,
        };
        fields.next().is_none().then_some(counts)
    }
}

/// Response classes (DESIGN "Response classes"; JOURNAL.md lists the codes). The code is stable.
pub const CLASSES: &[(u16, &str, Outcome)] = &[
    (0, "correct-success", Outcome::Completed),
    (1, "rejection", Outcome::Errored),
    (2, "http-status", Outcome::Errored),
    (3, "reset", Outcome::Errored),
    (4, "refused", Outcome::Errored),
    (5, "premature-close", Outcome::Errored),
    (6, "malformed-framing", Outcome::Errored),
    (7, "malformed-sse", Outcome::Errored),
    (8, "incorrect-success", Outcome::Errored),
    (9, "dns", Outcome::Errored),
    (10, "tls", Outcome::Errored),
    (11, "connect", Outcome::Errored),
    (12, "dependency-failure", Outcome::Errored),
    (20, "timeout", Outcome::Censored),
    (21, "run-end", Outcome::Censored),
    (22, "abandoned", Outcome::Censored),
    (30, "undispatched", Outcome::Undispatched),
    (31, "client-late", Outcome::Undispatched),
];

/// The name of a class code, or `None` for a code this build does not know.
pub fn class_name(code: u16) -> Option<&'static str> {
    CLASSES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, name, _)| *name)
}

/// The class code for a name.
pub fn class_code(name: &str) -> Option<u16> {
    CLASSES
        .iter()
        .find(|(_, n, _)| *n == name)
        .map(|(c, _, _)| *c)
}

/// Byte offsets inside a request body that readers may peek without decoding (JOURNAL.md).
pub const REQUEST_INDEX_OFFSET: usize = 0;
/// Where the outcome byte sits in a request body.
pub const REQUEST_OUTCOME_OFFSET: usize = 8;

/// A request body's intended time and its content gaps, read in place without decoding the rest
/// (JOURNAL.md's byte layout: the fixed fields, seven optional timestamps, the terminal time,
/// then the gaps as a u64 count and that many u32). For readers that need only the gaps, such as
/// the analyzer's pooled inter-chunk pass. `None` for a body too short for what it announces.
pub fn request_gaps(body: &[u8]) -> Option<(u64, impl Iterator<Item = u32> + Clone + '_)> {
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(body.get(at..at + 8)?.try_into().ok()?))
    };
    let intended = u64_at(15)?;
    let mut at = 23;
    for _ in 0..7 {
        match *body.get(at)? {
            0 => at += 1,
            1 => at += 9,
            _ => return None,
        }
    }
    at += 8; // terminal time
    let count = usize::try_from(u64_at(at)?).ok()?;
    at += 8;
    let gaps = body.get(at..at.checked_add(count.checked_mul(4)?)?)?;
    Some((
        intended,
        gaps.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    ))
}

/// One scheduled request, exactly once per index per journal. Times are ns from the epoch.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct RequestRecord {
    /// Its index in the schedule.
    pub index: u64,
    /// An [`Outcome`] byte.
    pub outcome: u8,
    /// Its response class code ([`CLASSES`]).
    pub class: u16,
    /// Its route's index in the configuration.
    pub route: u32,
    /// Intended send time t_i.
    pub intended_ns: u64,
    /// When the request was handed to the socket, if it was.
    pub dispatched_ns: Option<u64>,
    /// When a new connection's connect began (none on a reused connection).
    pub connect_start_ns: Option<u64>,
    /// When that connect finished.
    pub connect_end_ns: Option<u64>,
    /// When that TLS handshake finished.
    pub tls_done_ns: Option<u64>,
    /// When the last request byte was written.
    pub request_written_ns: Option<u64>,
    /// When the response head arrived.
    pub response_head_ns: Option<u64>,
    /// When the first content (a token chunk, or a non-streamed body) arrived.
    pub first_content_ns: Option<u64>,
    /// Completion, failure or cutoff time.
    pub terminal_ns: u64,
    /// Gaps between consecutive content events, us, at least 1 (§3).
    pub content_gaps_us: Vec<u32>,
    /// Content events received.
    pub content_events: u32,
    /// 0 when no status line was received.
    pub http_status: u16,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// `usage.prompt_tokens` as the server reported it.
    pub usage_prompt_tokens: Option<u32>,
    /// `usage.completion_tokens` as the server reported it.
    pub usage_completion_tokens: Option<u32>,
    /// The replica that served it (from a response header), empty when unattributed.
    pub replica: String,
    /// The connection the request used (ids are per worker).
    pub connection_id: u64,
    /// Whether that connection had carried a request before.
    pub connection_reused: bool,
    /// Free text behind the class: the status line, the OS error, the failed check.
    pub detail: String,
}

impl RequestRecord {
    /// The record's outcome, once its bytes are held to the rules every writer keeps and every
    /// reader checks (JOURNAL.md "1 request"): an outcome byte a version defines, and a class
    /// that, when this build knows it, belongs to that outcome (a class added later is accepted;
    /// the outcome byte still decides the accounting). The writer asserts them just before it
    /// encodes a record and the decoder just after it decodes one: a pair, so a record one side
    /// would refuse never passes the other.
    pub fn checked_outcome(&self) -> Result<Outcome, super::stream::BrokenRule> {
        let broken = |rule: String| super::stream::BrokenRule { rule };
        let outcome = Outcome::from_byte(self.outcome)
            .ok_or_else(|| broken(format!("outcome code {} is undefined", self.outcome)))?;
        match CLASSES.iter().find(|(c, _, _)| *c == self.class) {
            Some((_, name, class_outcome)) if *class_outcome != outcome => Err(broken(format!(
                "class {name} does not belong to outcome {}",
                outcome.name()
            ))),
            _ => Ok(outcome),
        }
    }
}

/// Kind 6: what a request asked for beyond v1's request record, as (key, value) pairs for the
/// request of the same index (JOURNAL.md "6 request-extension"). A key this build does not know
/// is kept and ignored; at most one extension per index.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct RequestExtension {
    /// The request's schedule index.
    pub index: u64,
    /// (key, value) pairs, keys from [`ExtensionKey`], each at most once.
    pub fields: Vec<(u16, u64)>,
}

/// The keys of a [`RequestExtension`] (JOURNAL.md lists them; a key never changes meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtensionKey {
    /// The `max_tokens` the request's body asked for.
    MaxTokens = 1,
    /// The generated prompt's length after the unique prefix, as the journaled tokenizer counts
    /// it (or, for a prompt file's prompt, its content's length), chat template not included.
    PromptTokens = 2,
    /// The HTTP version that carried the request: `1` HTTP/1.1, `2` HTTP/2. Written for every
    /// dispatched request of a run whose `target.http` is not `"1.1"`.
    Protocol = 3,
    /// The request's HTTP/2 stream id on its connection (`connection id`).
    StreamId = 4,
    /// A follow-up's session (closed: its user): the index of the session's first request
    /// (SPEC §1 "Workload models").
    Session = 5,
    /// A follow-up's turn in its session, from 1 (the first request is turn 0).
    Turn = 6,
}

impl ExtensionKey {
    /// The key of a code, `None` for one this build does not know.
    pub fn from_code(code: u16) -> Option<ExtensionKey> {
        Some(match code {
            1 => ExtensionKey::MaxTokens,
            2 => ExtensionKey::PromptTokens,
            3 => ExtensionKey::Protocol,
            4 => ExtensionKey::StreamId,
            5 => ExtensionKey::Session,
            6 => ExtensionKey::Turn,
            _ => return None,
        })
    }

    /// Its name, as `inspect` and JOURNAL.md write it.
    pub fn name(self) -> &'static str {
        match self {
            ExtensionKey::MaxTokens => "max_tokens",
            ExtensionKey::PromptTokens => "prompt_tokens",
            ExtensionKey::Protocol => "protocol",
            ExtensionKey::StreamId => "stream_id",
            ExtensionKey::Session => "session",
            ExtensionKey::Turn => "turn",
        }
    }
}

/// Serialized with each field by name (`{"max_tokens": 32}`), a key this build does not know as
/// `key-N`, for people reading `inspect`; the wire keeps the codes.
impl Serialize for RequestExtension {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields: BTreeMap<String, u64> = self
            .fields
            .iter()
            .map(|&(code, value)| {
                let name = ExtensionKey::from_code(code)
                    .map_or_else(|| format!("key-{code}"), |k| k.name().to_owned());
                (name, value)
            })
            .collect();
        let mut out = serializer.serialize_struct("RequestExtension", 2)?;
        out.serialize_field("index", &self.index)?;
        out.serialize_field("fields", &fields)?;
        out.end()
    }
}

impl RequestExtension {
    /// The value of `key`, if the extension carries it.
    pub fn get(&self, key: ExtensionKey) -> Option<u64> {
        self.fields
            .iter()
            .find(|(k, _)| *k == key as u16)
            .map(|(_, v)| *v)
    }
}

/// What an event record reports (JOURNAL.md lists the codes; a code never changes meaning).
///
/// The wire keeps the `u16` code, so a journal written by a newer recorder with a kind this
/// build does not know still decodes: [`EventKind::from_code`] gives `None` for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// The fault's injector is armed (a black-hole's expiry armed before firing).
    FaultArmed,
    /// The fault fired.
    FaultFired,
    /// Independent confirmation of the fault's impact (seeds/004).
    FaultConfirmed,
    /// The fault was removed, with the removal confirmed.
    FaultRemoved,
    /// The fault's pre-armed expiry ended it.
    FaultExpired,
    /// The injector failed: the fault did not happen as planned.
    FaultFailed,
    /// A direct probe of one replica: health, waiting-queue gauge or why it is down.
    Probe,
    /// A schedule phase began.
    Phase,
    /// A timeline boundary journaled by a controller (reschedule, container start, ...).
    Timeline,
    /// The operator stopped the run (SIGINT or SIGTERM).
    OperatorAbort,
    /// An abort trigger of the declaration fired, or the recorder's fall-behind policy did
    /// (subject [`CLIENT_BEHIND`]): the experiment escaped (seeds/004, SPEC §2).
    Escape,
    /// The journal writer's queue was full.
    WriterQueueFull,
    /// A second's runtime-stall summary (the ticker's lateness).
    StallSummary,
    /// A second's loopback-canary lag summary (§2 receive path).
    Canary,
    /// A second of the recorder's cgroup CPU usage and throttling against its quota (§2, G2.3).
    CgroupCpu,
    /// What the connection pool did that no request record shows, written once after the run
    /// (subject [`POOL_SUBJECT`]).
    Pool,
    /// A scrape of a server's metrics endpoint that gave no record (no answer in time, an
    /// answer over the size limit, not 200), or whose answer held lines that are not
    /// Prometheus text (SPEC §2 server-side evidence).
    Scrape,
}

impl EventKind {
    /// Every kind, in code order.
    pub const ALL: [EventKind; 17] = [
        EventKind::FaultArmed,
        EventKind::FaultFired,
        EventKind::FaultConfirmed,
        EventKind::FaultRemoved,
        EventKind::FaultExpired,
        EventKind::FaultFailed,
        EventKind::Probe,
        EventKind::Phase,
        EventKind::Timeline,
        EventKind::OperatorAbort,
        EventKind::Escape,
        EventKind::WriterQueueFull,
        EventKind::StallSummary,
        EventKind::Canary,
        EventKind::CgroupCpu,
        EventKind::Pool,
        EventKind::Scrape,
    ];

    /// The stable wire code.
    pub const fn code(self) -> u16 {
        match self {
            EventKind::FaultArmed => 1,
            EventKind::FaultFired => 2,
            EventKind::FaultConfirmed => 3,
            EventKind::FaultRemoved => 4,
            EventKind::FaultExpired => 5,
            EventKind::FaultFailed => 6,
            EventKind::Probe => 10,
            EventKind::Phase => 20,
            EventKind::Timeline => 21,
            EventKind::OperatorAbort => 30,
            EventKind::Escape => 31,
            EventKind::WriterQueueFull => 40,
            EventKind::StallSummary => 41,
            EventKind::Canary => 42,
            EventKind::CgroupCpu => 43,
            EventKind::Pool => 44,
            EventKind::Scrape => 45,
        }
    }

    /// The name JOURNAL.md, `inspect` and the exports use.
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::FaultArmed => "fault-armed",
            EventKind::FaultFired => "fault-fired",
            EventKind::FaultConfirmed => "fault-confirmed",
            EventKind::FaultRemoved => "fault-removed",
            EventKind::FaultExpired => "fault-expired",
            EventKind::FaultFailed => "fault-failed",
            EventKind::Probe => "probe",
            EventKind::Phase => "phase",
            EventKind::Timeline => "timeline",
            EventKind::OperatorAbort => "operator-abort",
            EventKind::Escape => "escape",
            EventKind::WriterQueueFull => "writer-queue-full",
            EventKind::StallSummary => "stall-summary",
            EventKind::Canary => "canary",
            EventKind::CgroupCpu => "cgroup-cpu",
            EventKind::Pool => "pool",
            EventKind::Scrape => "scrape",
        }
    }

    /// The kind with this wire code; `None` for a code this build does not know.
    pub fn from_code(code: u16) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The kind with this name (for `inspect --kind` and other user input).
    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The name of an event code, `None` for a code this build does not know.
pub fn event_kind_name(code: u16) -> Option<&'static str> {
    EventKind::from_code(code).map(EventKind::name)
}

/// Something that happened during the run other than a request ending.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct EventRecord {
    /// When it happened, ns from the epoch.
    pub at_ns: u64,
    /// An [`EventKind`] code.
    pub kind: u16,
    /// What it concerns: a replica, a phase name, a probe target.
    pub subject: String,
    /// What happened, in words (JOURNAL.md gives each kind's form).
    pub detail: String,
    /// A number the kind defines (a gauge, a time, a grace period), when it has one.
    pub value: Option<i64>,
}

impl EventRecord {
    /// An event of a known kind.
    pub fn new(
        at_ns: u64,
        kind: EventKind,
        subject: impl Into<String>,
        detail: impl Into<String>,
        value: Option<i64>,
    ) -> EventRecord {
        EventRecord {
            at_ns,
            kind: kind.code(),
            subject: subject.into(),
            detail: detail.into(),
            value,
        }
    }

    /// Its kind; `None` for a code this build does not know (a newer recorder's).
    pub fn event_kind(&self) -> Option<EventKind> {
        EventKind::from_code(self.kind)
    }

    /// Whether it is of this kind.
    pub fn is(&self, kind: EventKind) -> bool {
        self.kind == kind.code()
    }
}

/// The recorder's self-check over one interval (SPEC §2).
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct TelemetryRecord {
    /// The interval's end, ns from the epoch.
    pub at_ns: u64,
    /// The interval's length.
    pub interval_ns: u64,
    /// Busy share of all host cores over the interval, parts per million (/proc/stat).
    pub host_cpu_busy_ppm: u32,
    /// CPU time the recorder process used in the interval.
    pub recorder_cpu_ns: u64,
    /// Runtime stall: lateness of a high-rate ticker (SPEC §2), p99 and max over the interval.
    pub stall_p99_ns: u64,
    /// The ticker's largest lateness over the interval.
    pub stall_max_ns: u64,
    /// Ticker samples in the interval.
    pub stall_samples: u32,
    /// Send skew (dispatch minus intended) of the requests dispatched in the interval.
    pub skew_count: u32,
    /// Median send skew of the interval's dispatches.
    pub skew_p50_ns: u64,
    /// p99 send skew.
    pub skew_p99_ns: u64,
    /// Largest send skew.
    pub skew_max_ns: u64,
    /// Requests the recorder has given up dispatching, since the start.
    pub undispatched_total: u64,
    /// Requests in flight at the interval's end.
    pub in_flight: u32,
    /// The writer queue's depth at the interval's end.
    pub writer_queue_depth: u32,
    /// The writer queue's largest depth in the interval.
    pub writer_queue_max: u32,
}

/// `host_cpu_busy_ppm` of a second whose host CPU reading was not taken (/proc/stat could not
/// be read, or the reading before it was not): never a share (at most 1,000,000).
pub const HOST_CPU_NOT_READ: u32 = u32::MAX;
/// `recorder_cpu_ns` of a second whose recorder CPU reading was not taken (/proc/self/stat
/// could not be read then, or the second before it): never a second's CPU time.
pub const RECORDER_CPU_NOT_READ: u64 = u64::MAX;

impl TelemetryRecord {
    /// The host's busy share of its cores over the interval, 0..=1; `None` when the reading
    /// was not taken ([`HOST_CPU_NOT_READ`]).
    pub fn host_cpu(&self) -> Option<f64> {
        (self.host_cpu_busy_ppm != HOST_CPU_NOT_READ)
            .then(|| f64::from(self.host_cpu_busy_ppm) / 1e6)
    }

    /// The recorder's CPU time over the interval, ns; `None` when the reading was not taken
    /// ([`RECORDER_CPU_NOT_READ`]).
    pub fn recorder_cpu(&self) -> Option<u64> {
        (self.recorder_cpu_ns != RECORDER_CPU_NOT_READ).then_some(self.recorder_cpu_ns)
    }
}

/// The signed part of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct CheckpointBody {
    /// 0 for the first checkpoint, then 1, 2, ...
    pub sequence: u64,
    /// When it was written, ns from the epoch.
    pub at_ns: u64,
    /// Records before this checkpoint's block.
    pub records_before: u64,
    /// The chain value at the end of the previous block.
    #[serde(serialize_with = "as_hex")]
    pub chain_before: [u8; 32],
}

/// A checkpoint record: always the only record of its block.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct Checkpoint {
    /// What is signed.
    pub body: CheckpointBody,
    /// ed25519 over `CHECKPOINT_DOMAIN || bincode(body)`, when the journal is signed.
    #[serde(serialize_with = "as_hex_opt")]
    pub signature: Option<[u8; 64]>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealStatus {
    /// Every scheduled request reached a terminal state.
    Completed = 0,
    /// Stopped early (signal, operator, error): analysis refuses to publish.
    Aborted = 1,
    /// A declared abort trigger fired (seeds/004): load stopped, clock kept.
    Escaped = 2,
}

impl SealStatus {
    /// The status with this byte.
    pub fn from_byte(byte: u8) -> Option<SealStatus> {
        Some(match byte {
            0 => SealStatus::Completed,
            1 => SealStatus::Aborted,
            2 => SealStatus::Escaped,
            _ => return None,
        })
    }
    /// Its name in `verify` output and reports.
    pub fn name(self) -> &'static str {
        match self {
            SealStatus::Completed => "completed",
            SealStatus::Aborted => "aborted",
            SealStatus::Escaped => "escaped",
        }
    }
}

/// Counts that the seal states and a verifier recounts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct Counts {
    /// Request records.
    pub requests: u64,
    /// Of which completed.
    pub completed: u64,
    /// Of which errored.
    pub errored: u64,
    /// Of which censored.
    pub censored: u64,
    /// Of which never dispatched.
    pub undispatched: u64,
    /// Event records.
    pub events: u64,
    /// Telemetry records.
    pub telemetry: u64,
    /// Checkpoints.
    pub checkpoints: u64,
    /// Records of kinds this build does not know.
    pub other: u64,
}

/// The signed part of the seal.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct SealBody {
    /// When the run was sealed, ns from the epoch.
    pub at_ns: u64,
    /// A [`SealStatus`] byte.
    pub status: u8,
    /// Why the run ended so.
    pub reason: String,
    /// Records before the seal's block.
    pub records_before: u64,
    /// What the journal holds, by kind and outcome.
    pub counts: Counts,
    #[serde(serialize_with = "as_hex")]
    /// The chain value at the end of the previous block.
    pub chain_before: [u8; 32],
}

/// The final record: the only record of the last block, which ends the file.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct Seal {
    /// What is signed.
    pub body: SealBody,
    #[serde(serialize_with = "as_hex_opt")]
    /// ed25519 over `SEAL_DOMAIN || bincode(body)`, when the journal is signed.
    pub signature: Option<[u8; 64]>,
}

/// Prefix of the message a checkpoint signature covers.
pub const CHECKPOINT_DOMAIN: &[u8] = b"percentes journal v1 checkpoint\0";
/// Prefix of the message the seal signature covers.
pub const SEAL_DOMAIN: &[u8] = b"percentes journal v1 seal\0";

/// The bytes a checkpoint signature signs.
pub fn checkpoint_message(body: &CheckpointBody) -> Vec<u8> {
    let mut message = CHECKPOINT_DOMAIN.to_vec();
    message
        .extend(bincode::encode_to_vec(body, codec()).expect("a checkpoint body always encodes"));
    message
}

/// The bytes the seal signature signs.
pub fn seal_message(body: &SealBody) -> Vec<u8> {
    let mut message = SEAL_DOMAIN.to_vec();
    message.extend(bincode::encode_to_vec(body, codec()).expect("a seal body always encodes"));
    message
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "record", rename_all = "kebab-case")]
pub enum Record {
    /// A request record.
    Request(RequestRecord),
    /// An event record.
    Event(EventRecord),
    /// A telemetry record.
    Telemetry(TelemetryRecord),
    /// A checkpoint.
    Checkpoint(Checkpoint),
    /// The seal.
    Seal(Seal),
    /// A request's extension fields (kind 6).
    RequestExtension(RequestExtension),
    /// One scrape of a server's metrics (kind 7).
    Scrape(super::scrape::ScrapeRecord),
    /// A response's generated output by kind and delivery (kind 8).
    Stream(super::stream::StreamRecord),
    /// A kind added after v1's first release; carried, not interpreted.
    Unknown {
        /// Its kind byte.
        kind_byte: u8,
        /// Its body, undecoded.
        #[serde(serialize_with = "as_hex")]
        body: Vec<u8>,
    },
}

/// Why a record body did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// The record kind byte.
    pub kind: u8,
    /// What bincode said.
    pub message: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "record of kind {} does not decode: {}",
            self.kind, self.message
        )
    }
}

impl Record {
    /// Its kind byte.
    pub fn kind_byte(&self) -> u8 {
        match self {
            Record::Request(_) => RecordKind::Request as u8,
            Record::Event(_) => RecordKind::Event as u8,
            Record::Telemetry(_) => RecordKind::Telemetry as u8,
            Record::Checkpoint(_) => RecordKind::Checkpoint as u8,
            Record::Seal(_) => RecordKind::Seal as u8,
            Record::RequestExtension(_) => RecordKind::RequestExtension as u8,
            Record::Scrape(_) => RecordKind::Scrape as u8,
            Record::Stream(_) => RecordKind::Stream as u8,
            Record::Unknown { kind_byte, .. } => *kind_byte,
        }
    }

    /// The body bytes.
    pub fn encode_body(&self) -> Vec<u8> {
        let encoded = match self {
            Record::Request(r) => bincode::encode_to_vec(r, codec()),
            Record::Event(r) => bincode::encode_to_vec(r, codec()),
            Record::Telemetry(r) => bincode::encode_to_vec(r, codec()),
            Record::Checkpoint(r) => bincode::encode_to_vec(r, codec()),
            Record::Seal(r) => bincode::encode_to_vec(r, codec()),
            Record::RequestExtension(r) => bincode::encode_to_vec(r, codec()),
            Record::Scrape(r) => bincode::encode_to_vec(r, codec()),
            Record::Stream(r) => bincode::encode_to_vec(r, codec()),
            Record::Unknown { body, .. } => Ok(body.clone()),
        };
        // Only the size limit can fail, and the writer checks sizes with a typed error first.
        encoded.unwrap_or_default()
    }

    /// Decodes a body of the given kind. Every byte must be used.
    pub fn decode(kind: u8, body: &[u8]) -> Result<Record, DecodeError> {
        fn all<T: Decode<()>>(kind: u8, body: &[u8]) -> Result<T, DecodeError> {
            let (value, used) =
                bincode::decode_from_slice::<T, _>(body, codec()).map_err(|e| DecodeError {
                    kind,
                    message: e.to_string(),
                })?;
            if used != body.len() {
                return Err(DecodeError {
                    kind,
                    message: format!("{} bytes left over", body.len() - used),
                });
            }
            Ok(value)
        }
        if body.len() > RECORD_BYTES_MAX as usize {
            return Err(DecodeError {
                kind,
                message: format!("{} bytes is over the record limit", body.len()),
            });
        }
        let record = match RecordKind::from_byte(kind) {
            Some(RecordKind::Request) => Record::Request(all(kind, body)?),
            Some(RecordKind::Event) => Record::Event(all(kind, body)?),
            Some(RecordKind::Telemetry) => Record::Telemetry(all(kind, body)?),
            Some(RecordKind::Checkpoint) => Record::Checkpoint(all(kind, body)?),
            Some(RecordKind::Seal) => Record::Seal(all(kind, body)?),
            Some(RecordKind::RequestExtension) => Record::RequestExtension(all(kind, body)?),
            Some(RecordKind::Scrape) => Record::Scrape(all(kind, body)?),
            Some(RecordKind::Stream) => Record::Stream(all(kind, body)?),
            None => Record::Unknown {
                kind_byte: kind,
                body: body.to_vec(),
            },
        };
        if let Record::Request(r) = &record {
            r.checked_outcome().map_err(|broken| DecodeError {
                kind,
                message: broken.rule,
            })?;
        }
        Ok(record)
    }
}

fn as_hex<S: Serializer, B: AsRef<[u8]>>(bytes: &B, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&super::hex(bytes.as_ref()))
}

fn as_hex_opt<S: Serializer>(bytes: &Option<[u8; 64]>, s: S) -> Result<S::Ok, S::Error> {
    match bytes {
        Some(b) => s.serialize_str(&super::hex(b)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_request_extension_reads_by_name_and_keeps_an_unknown_key() {
        let extension = RequestExtension {
            index: 7,
            fields: vec![(3, 2), (4, 1), (1, 32), (99, 5)],
        };
        let json = serde_json::to_value(&extension).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "index": 7,
                "fields": {"protocol": 2, "stream_id": 1, "max_tokens": 32, "key-99": 5}
            })
        );
        assert_eq!(extension.get(ExtensionKey::Protocol), Some(2));
        for code in 1..=6 {
            let key = ExtensionKey::from_code(code).unwrap();
            assert_eq!(key as u16, code, "{}", key.name());
        }
        assert_eq!(ExtensionKey::from_code(7), None);
    }

    use super::*;

    /// Each timeline subject has one name, and reads back from it; the names JOURNAL.md lists
    /// for the analyzer are among them.
    #[test]
    fn timeline_subjects_round_trip_by_name() {
        let mut names: Vec<&str> = TimelineSubject::ALL.map(TimelineSubject::name).to_vec();
        for subject in TimelineSubject::ALL {
            assert_eq!(TimelineSubject::parse(subject.name()), Some(subject));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TimelineSubject::ALL.len());
        let documented = include_str!("../../JOURNAL.md");
        for read in [
            "reschedule",
            "container-start",
            "weight-load",
            "graph-capture",
            "detected",
            "node-monitor-grace",
        ] {
            assert!(
                TimelineSubject::parse(read).is_some() && documented.contains(&format!("`{read}`")),
                "{read}"
            );
        }
        assert_eq!(TimelineSubject::parse("ready"), None);
    }

    #[test]
    fn a_pool_detail_reads_back_and_nothing_else_does() {
        let counts = PoolCounts {
            opened_ahead: 54,
            expired: 2,
            found_closed: 0,
        };
        assert_eq!(counts.detail(), "opened_ahead=54 expired=2 found_closed=0");
        assert_eq!(PoolCounts::parse(&counts.detail()), Some(counts));
        for bad in [
            "",
            "opened_ahead=54 expired=2",
            "opened_ahead=54 expired=2 found_closed=0 more=1",
            "expired=2 opened_ahead=54 found_closed=0",
            "opened_ahead=-1 expired=2 found_closed=0",
        ] {
            assert_eq!(PoolCounts::parse(bad), None, "{bad}");
        }
    }

    /// The layout promise of JOURNAL.md: integers fixed-width little-endian, options as a 0/1
    /// byte, vectors and strings with a u64 length, arrays without one.
    #[test]
    fn bincode_layout_is_the_documented_one() {
        let body = CheckpointBody {
            sequence: 1,
            at_ns: 2,
            records_before: 3,
            chain_before: [0xab; 32],
        };
        let checkpoint = Checkpoint {
            body,
            signature: None,
        };
        let bytes = Record::Checkpoint(checkpoint).encode_body();
        let mut expected = Vec::new();
        expected.extend(1u64.to_le_bytes());
        expected.extend(2u64.to_le_bytes());
        expected.extend(3u64.to_le_bytes());
        expected.extend([0xab; 32]);
        expected.push(0);
        assert_eq!(bytes, expected);

        let event = EventRecord {
            at_ns: 5,
            kind: 2,
            subject: "r1".into(),
            detail: String::new(),
            value: Some(-1),
        };
        let bytes = Record::Event(event).encode_body();
        let mut expected = Vec::new();
        expected.extend(5u64.to_le_bytes());
        expected.extend(2u16.to_le_bytes());
        expected.extend(2u64.to_le_bytes());
        expected.extend(b"r1");
        expected.extend(0u64.to_le_bytes());
        expected.push(1);
        expected.extend((-1i64).to_le_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn request_peek_offsets_hold() {
        let record = crate::journal::synthetic::request(7, 1, 1_000);
        let bytes = Record::Request(record.clone()).encode_body();
        assert_eq!(
            u64::from_le_bytes(bytes[REQUEST_INDEX_OFFSET..8].try_into().unwrap()),
            7
        );
        assert_eq!(bytes[REQUEST_OUTCOME_OFFSET], record.outcome);
    }

    #[test]
    fn class_must_match_outcome() {
        let mut record = crate::journal::synthetic::request(7, 1, 1_000);
        record.outcome = Outcome::Completed as u8;
        record.class = class_code("reset").unwrap();
        let bytes = Record::Request(record).encode_body();
        let error = Record::decode(RecordKind::Request as u8, &bytes).unwrap_err();
        assert!(error.message.contains("does not belong"), "{error}");
    }

    #[test]
    fn request_gaps_reads_what_a_full_decode_reads() {
        for index in 0..200u64 {
            let mut r = crate::journal::synthetic::request(index, index % 100, index * 1_000_000);
            // Vary which optional timestamps are present.
            if index % 3 == 0 {
                r.tls_done_ns = Some(7);
            }
            if index % 5 == 0 {
                r.connect_start_ns = None;
                r.connect_end_ns = None;
            }
            if index % 7 == 0 {
                r.first_content_ns = None;
            }
            let body = Record::Request(r.clone()).encode_body();
            let (intended, gaps) = request_gaps(&body).unwrap();
            assert_eq!(intended, r.intended_ns);
            assert_eq!(gaps.collect::<Vec<_>>(), r.content_gaps_us);
        }
        assert!(request_gaps(&[0u8; 10]).is_none());
        // Cut anywhere, a body gives the whole gaps or nothing: never a partial read, never a
        // read beyond its end.
        let r = crate::journal::synthetic::request(1, 50, 1_000);
        let body = Record::Request(r.clone()).encode_body();
        for cut in 0..body.len() {
            if let Some((_, gaps)) = request_gaps(&body[..cut]) {
                assert_eq!(gaps.collect::<Vec<_>>(), r.content_gaps_us, "cut at {cut}");
            }
        }
    }
}
