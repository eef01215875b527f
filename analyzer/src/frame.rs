//! The run's rows, one column per field: one row per scheduled request, one per event, one per
//! telemetry sample (SPEC §3, §9).
//!
//! The request table is dense: row `p` is the shard's `p`-th scheduled index, filled in from the
//! schedule before any record is read, so a request with no record is a row whose outcome is
//! [`NO_RECORD`], never a missing row. Absent timestamps are [`NONE`]. Free text (replica names,
//! failure details) is interned: a journal of ten million requests carries a few hundred distinct
//! strings, and the table stays at 151 bytes a row (BENCHMARKS.md, "Where the memory goes").
//!
//! [`crate::export`] turns these columns into polars frames without copying the primitive ones.

use std::collections::HashMap;

use percentes_formats::journal::records::EventKind;
use percentes_formats::journal::records::{
    EventRecord, ExtensionKey, Outcome, RequestExtension, RequestRecord, TelemetryRecord,
};

/// The value of an absent timestamp or count.
pub const NONE: u64 = u64::MAX;
/// The outcome byte of a scheduled request that has no record (only in an unpublishable run).
pub const NO_RECORD: u8 = u8::MAX;

/// Strings stored once, referred to by number.
#[derive(Clone, Debug, Default)]
pub struct Interned {
    /// The distinct strings, by id; id 0 is the empty string.
    pub values: Vec<String>,
    lookup: HashMap<String, u32>,
}

impl Interned {
    /// The number of `value`, adding it when new.
    pub fn id(&mut self, value: &str) -> u32 {
        if let Some(&id) = self.lookup.get(value) {
            return id;
        }
        let id = self.values.len() as u32;
        self.values.push(value.to_owned());
        self.lookup.insert(value.to_owned(), id);
        id
    }

    /// The string with this id.
    pub fn get(&self, id: u32) -> &str {
        self.values.get(id as usize).map_or("", String::as_str)
    }

    /// The number of `value` if it was ever interned.
    pub fn find(&self, value: &str) -> Option<u32> {
        self.lookup.get(value).copied()
    }
}

/// One row per scheduled request of the shard, in index order.
#[derive(Clone, Debug, Default)]
pub struct Requests {
    /// The request's schedule index (row p holds the shard's p-th index).
    pub index: Vec<u64>,
    /// Intended send time t_i, ns from the epoch.
    pub intended_ns: Vec<u64>,
    /// Route index.
    pub route: Vec<u32>,
    /// Index into the schedule's phases.
    pub phase: Vec<u32>,
    /// [`Outcome`] as its byte, or [`NO_RECORD`].
    pub outcome: Vec<u8>,
    /// Response class code.
    pub class: Vec<u16>,
    /// Dispatch time, or [`NONE`].
    pub dispatched_ns: Vec<u64>,
    /// Connect start, or [`NONE`].
    pub connect_start_ns: Vec<u64>,
    /// Connect end, or [`NONE`].
    pub connect_end_ns: Vec<u64>,
    /// TLS handshake end, or [`NONE`].
    pub tls_done_ns: Vec<u64>,
    /// Last request byte written, or [`NONE`].
    pub request_written_ns: Vec<u64>,
    /// Response head, or [`NONE`].
    pub response_head_ns: Vec<u64>,
    /// First content, or [`NONE`].
    pub first_content_ns: Vec<u64>,
    /// Terminal time (completion, failure or cutoff).
    pub terminal_ns: Vec<u64>,
    /// Content events received.
    pub content_events: Vec<u32>,
    /// HTTP status, 0 without a status line.
    pub http_status: Vec<u16>,
    /// Bytes written.
    pub bytes_sent: Vec<u64>,
    /// Bytes read.
    pub bytes_received: Vec<u64>,
    /// [`NONE`] as `u32::MAX` when the server reported no usage.
    pub usage_prompt_tokens: Vec<u32>,
    /// `usage.completion_tokens`, [`NONE`] as `u32::MAX` when unreported.
    pub usage_completion_tokens: Vec<u32>,
    /// The `max_tokens` the request asked for, from its kind-6 extension; `u32::MAX` without
    /// one (the route's pinned length, SPEC §P "Token lengths").
    pub max_tokens: Vec<u32>,
    /// Its prompt's length as the journaled tokenizer counted it (kind 6); `u32::MAX` when not
    /// counted.
    pub prompt_tokens_sent: Vec<u32>,
    /// The HTTP version that carried it (kind 6): 1 or 2; 0 when not recorded (a run of
    /// `target.http = "1.1"`, every journal before HTTP/2, or a request never dispatched).
    pub protocol: Vec<u8>,
    /// Its HTTP/2 stream id on its connection (kind 6); `u32::MAX` when none.
    pub stream_id: Vec<u32>,
    /// Into [`Requests::replicas`]; the empty string is "unattributed".
    pub replica: Vec<u32>,
    /// The connection's id (per worker).
    pub connection_id: Vec<u64>,
    /// Whether the connection had carried a request before.
    pub connection_reused: Vec<bool>,
    /// Into [`Requests::details`].
    pub detail: Vec<u32>,
    /// Replica names, interned.
    pub replicas: Interned,
    /// Failure details, interned.
    pub details: Interned,
}

fn opt(value: Option<u64>) -> u64 {
    value.unwrap_or(NONE)
}

impl Requests {
    /// An empty table with room for `rows`.
    pub fn with_capacity(rows: usize) -> Requests {
        let mut replicas = Interned::default();
        replicas.id("");
        Requests {
            index: Vec::with_capacity(rows),
            intended_ns: Vec::with_capacity(rows),
            route: Vec::with_capacity(rows),
            phase: Vec::with_capacity(rows),
            replicas,
            ..Requests::default()
        }
    }

    /// Rows (scheduled requests of the shard).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Adds a scheduled row with no record yet.
    pub fn push_scheduled(&mut self, index: u64, intended_ns: u64, route: u32, phase: u32) {
        self.index.push(index);
        self.intended_ns.push(intended_ns);
        self.route.push(route);
        self.phase.push(phase);
    }

    /// Gives every scheduled row its record columns, all "no record" until [`Requests::fill`].
    pub fn reserve_records(&mut self) {
        let n = self.len();
        self.outcome = vec![NO_RECORD; n];
        self.class = vec![0; n];
        for column in [
            &mut self.dispatched_ns,
            &mut self.connect_start_ns,
            &mut self.connect_end_ns,
            &mut self.tls_done_ns,
            &mut self.request_written_ns,
            &mut self.response_head_ns,
            &mut self.first_content_ns,
            &mut self.terminal_ns,
        ] {
            *column = vec![NONE; n];
        }
        self.content_events = vec![0; n];
        self.http_status = vec![0; n];
        self.bytes_sent = vec![0; n];
        self.bytes_received = vec![0; n];
        self.usage_prompt_tokens = vec![u32::MAX; n];
        self.usage_completion_tokens = vec![u32::MAX; n];
        self.max_tokens = vec![u32::MAX; n];
        self.prompt_tokens_sent = vec![u32::MAX; n];
        self.protocol = vec![0; n];
        self.stream_id = vec![u32::MAX; n];
        self.replica = vec![0; n];
        self.connection_id = vec![NONE; n];
        self.connection_reused = vec![false; n];
        let empty = self.details.id("");
        self.detail = vec![empty; n];
    }

    /// Writes `record` into row `row`.
    pub fn fill(&mut self, row: usize, record: &RequestRecord) {
        self.outcome[row] = record.outcome;
        self.class[row] = record.class;
        self.dispatched_ns[row] = opt(record.dispatched_ns);
        self.connect_start_ns[row] = opt(record.connect_start_ns);
        self.connect_end_ns[row] = opt(record.connect_end_ns);
        self.tls_done_ns[row] = opt(record.tls_done_ns);
        self.request_written_ns[row] = opt(record.request_written_ns);
        self.response_head_ns[row] = opt(record.response_head_ns);
        self.first_content_ns[row] = opt(record.first_content_ns);
        self.terminal_ns[row] = record.terminal_ns;
        self.content_events[row] = record.content_events;
        self.http_status[row] = record.http_status;
        self.bytes_sent[row] = record.bytes_sent;
        self.bytes_received[row] = record.bytes_received;
        self.usage_prompt_tokens[row] = record.usage_prompt_tokens.unwrap_or(u32::MAX);
        self.usage_completion_tokens[row] = record.usage_completion_tokens.unwrap_or(u32::MAX);
        self.replica[row] = self.replicas.id(&record.replica);
        self.connection_id[row] = record.connection_id;
        self.connection_reused[row] = record.connection_reused;
        self.detail[row] = self.details.id(&record.detail);
    }

    /// Writes a kind-6 extension into row `row`; keys this build does not know are ignored.
    pub fn extend(&mut self, row: usize, extension: &RequestExtension) {
        let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX - 1);
        if let Some(v) = extension.get(ExtensionKey::MaxTokens) {
            self.max_tokens[row] = clamp(v);
        }
        if let Some(v) = extension.get(ExtensionKey::PromptTokens) {
            self.prompt_tokens_sent[row] = clamp(v);
        }
        if let Some(v) = extension.get(ExtensionKey::Protocol) {
            self.protocol[row] = u8::try_from(v).unwrap_or(u8::MAX);
        }
        if let Some(v) = extension.get(ExtensionKey::StreamId) {
            self.stream_id[row] = clamp(v);
        }
    }

    /// The outcome of row `row`, `None` when it has no record.
    pub fn outcome(&self, row: usize) -> Option<Outcome> {
        Outcome::from_byte(self.outcome[row])
    }

    /// The replica that served row `row`, `None` when unattributed.
    pub fn replica_name(&self, row: usize) -> Option<&str> {
        Some(self.replicas.get(self.replica[row])).filter(|name| !name.is_empty())
    }
}

/// One row per event record.
#[derive(Clone, Debug, Default)]
pub struct Events {
    /// The event records, in journal order.
    pub rows: Vec<EventRecord>,
}

impl Events {
    /// The first event of `kind`, in journal order.
    pub fn first(&self, kind: EventKind) -> Option<&EventRecord> {
        self.rows.iter().find(|e| e.is(kind))
    }

    /// Every event of `kind`, in journal order.
    pub fn all(&self, kind: EventKind) -> impl Iterator<Item = &EventRecord> + '_ {
        self.rows.iter().filter(move |e| e.is(kind))
    }
}

/// One row per telemetry sample, in journal order (a merged run's shard by shard).
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    /// The telemetry records, in journal order.
    pub rows: Vec<TelemetryRecord>,
    /// Each journal's rows, as a range of `rows` (one range for a single journal; none for a
    /// table built by hand, which reads as one recorder's).
    pub shards: Vec<std::ops::Range<usize>>,
    /// The recorders' `cgroup-cpu` seconds, journal by journal in journal order, each with the
    /// index of the journal that wrote it (0 for a single journal).
    pub cgroup: Vec<CgroupRow>,
}

/// One `cgroup-cpu` event as read (JOURNAL.md): the second it closes and its accounting.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CgroupRow {
    /// The journal (shard) that wrote it, in the order the run's files were given.
    pub shard: usize,
    /// The interval's end, ns from the epoch.
    pub at_ns: u64,
    /// The second's usage, throttling and quota.
    pub cpu: percentes_formats::journal::cgroup::CgroupCpu,
}

impl Telemetry {
    /// Each recorder's rows: a recorder's own telemetry (its CPU, its ticker, its undispatched
    /// count) is read per recorder, then the worst recorder is what a gate sees.
    pub fn by_shard(&self) -> Vec<&[TelemetryRecord]> {
        if self.shards.is_empty() {
            return vec![&self.rows];
        }
        self.shards.iter().map(|r| &self.rows[r.clone()]).collect()
    }

    /// Each recorder's cgroup seconds, aligned with [`Self::by_shard`].
    pub fn cgroup_by_shard(&self) -> Vec<Vec<&CgroupRow>> {
        let recorders = self.shards.len().max(1);
        let mut out = vec![Vec::new(); recorders];
        for row in &self.cgroup {
            if let Some(shard) = out.get_mut(row.shard) {
                shard.push(row);
            }
        }
        out
    }
}
