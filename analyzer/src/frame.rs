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
use std::path::Path;

mod column;
pub mod streams;
pub use column::{Column, Place, SpillError};
pub use streams::Streams;

use percentes_formats::journal::stream::StreamRecord;
use percentes_formats::spec::StreamReading;

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
///
/// The numeric columns are [`Column`]s: on the heap, or in spill files when the table is larger
/// than its memory budget ([`Requests::spill`]); either way a reader sees slices. The one-byte
/// columns stay on the heap (three bytes a row).
#[derive(Debug, Default)]
pub struct Requests {
    /// The request's schedule index (row p holds the shard's p-th index).
    pub index: Column<u64>,
    /// Intended send time t_i, ns from the epoch.
    pub intended_ns: Column<u64>,
    /// Route index.
    pub route: Column<u32>,
    /// Index into the schedule's phases.
    pub phase: Column<u32>,
    /// [`Outcome`] as its byte, or [`NO_RECORD`].
    pub outcome: Vec<u8>,
    /// Response class code.
    pub class: Column<u16>,
    /// Dispatch time, or [`NONE`].
    pub dispatched_ns: Column<u64>,
    /// Connect start, or [`NONE`].
    pub connect_start_ns: Column<u64>,
    /// Connect end, or [`NONE`].
    pub connect_end_ns: Column<u64>,
    /// TLS handshake end, or [`NONE`].
    pub tls_done_ns: Column<u64>,
    /// Last request byte written, or [`NONE`].
    pub request_written_ns: Column<u64>,
    /// Response head, or [`NONE`].
    pub response_head_ns: Column<u64>,
    /// First content, or [`NONE`].
    pub first_content_ns: Column<u64>,
    /// Terminal time (completion, failure or cutoff).
    pub terminal_ns: Column<u64>,
    /// Content events received.
    pub content_events: Column<u32>,
    /// HTTP status, 0 without a status line.
    pub http_status: Column<u16>,
    /// Bytes written.
    pub bytes_sent: Column<u64>,
    /// Bytes read.
    pub bytes_received: Column<u64>,
    /// [`NONE`] as `u32::MAX` when the server reported no usage.
    pub usage_prompt_tokens: Column<u32>,
    /// `usage.completion_tokens`, [`NONE`] as `u32::MAX` when unreported.
    pub usage_completion_tokens: Column<u32>,
    /// The `max_tokens` the request asked for, from its kind-6 extension; `u32::MAX` without
    /// one (the route's pinned length, SPEC §P "Token lengths").
    pub max_tokens: Column<u32>,
    /// Its prompt's length as the journaled tokenizer counted it (kind 6); `u32::MAX` when not
    /// counted.
    pub prompt_tokens_sent: Column<u32>,
    /// The HTTP version that carried it (kind 6): 1 or 2; 0 when not recorded (a run of
    /// `target.http = "1.1"`, every journal before HTTP/2, or a request never dispatched).
    pub protocol: Vec<u8>,
    /// Its HTTP/2 stream id on its connection (kind 6); `u32::MAX` when none.
    pub stream_id: Column<u32>,
    /// Into [`Requests::replicas`]; the empty string is "unattributed".
    pub replica: Column<u32>,
    /// The connection's id (per worker).
    pub connection_id: Column<u64>,
    /// Whether the connection had carried a request before.
    pub connection_reused: Vec<bool>,
    /// Into [`Requests::details`].
    pub detail: Column<u32>,
    /// Replica names, interned.
    pub replicas: Interned,
    /// Failure details, interned.
    pub details: Interned,
    /// Each request's generated output by kind (kind 8), once the journal's first stream record
    /// is read; `None` for a journal without any.
    pub streams: Option<Streams>,
    /// Where the record columns are made by [`Requests::reserve_records`].
    place: Place,
}

fn opt(value: Option<u64>) -> u64 {
    value.unwrap_or(NONE)
}

impl Requests {
    /// The bytes a row takes: thirteen columns of 8 bytes (the index, nine timestamps, two byte
    /// counts, the connection id), ten of 4, two of 2 and three of 1 (a test counts them).
    pub const BYTES_PER_ROW: u64 = 151;

    /// An empty table with room for `rows`.
    pub fn with_capacity(rows: usize) -> Requests {
        let mut replicas = Interned::default();
        replicas.id("");
        Requests {
            index: Vec::with_capacity(rows).into(),
            intended_ns: Vec::with_capacity(rows).into(),
            route: Vec::with_capacity(rows).into(),
            phase: Vec::with_capacity(rows).into(),
            replicas,
            ..Requests::default()
        }
    }

    /// Moves the scheduled columns into spill files in `dir`, and makes the record columns
    /// there when [`Requests::reserve_records`] comes (call it between the two). The one-byte
    /// columns stay on the heap.
    pub fn spill(&mut self, dir: &Path) -> Result<(), SpillError> {
        self.index.spill(dir)?;
        self.intended_ns.spill(dir)?;
        self.route.spill(dir)?;
        self.phase.spill(dir)?;
        self.place = Place::Spilled(dir.to_path_buf());
        Ok(())
    }

    /// Hands every spilled column's pages back to the kernel ([`Column::release`]): called
    /// between statistics, so that what stays resident is what the running one reads.
    pub fn release(&self) {
        if !self.is_spilled() {
            return;
        }
        for column in [
            &self.index,
            &self.intended_ns,
            &self.dispatched_ns,
            &self.connect_start_ns,
            &self.connect_end_ns,
            &self.tls_done_ns,
            &self.request_written_ns,
            &self.response_head_ns,
            &self.first_content_ns,
            &self.terminal_ns,
            &self.bytes_sent,
            &self.bytes_received,
            &self.connection_id,
        ] {
            column.release();
        }
        for column in [
            &self.route,
            &self.phase,
            &self.content_events,
            &self.usage_prompt_tokens,
            &self.usage_completion_tokens,
            &self.max_tokens,
            &self.prompt_tokens_sent,
            &self.stream_id,
            &self.replica,
            &self.detail,
        ] {
            column.release();
        }
        self.class.release();
        self.http_status.release();
        if let Some(streams) = &self.streams {
            streams.release();
        }
    }

    /// Whether the numeric columns live in spill files.
    pub fn is_spilled(&self) -> bool {
        self.place != Place::Heap
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
    pub fn reserve_records(&mut self) -> Result<(), SpillError> {
        let n = self.len();
        let place = self.place.clone();
        self.outcome = vec![NO_RECORD; n];
        self.class = Column::filled(n, 0, &place)?;
        for column in [
            &mut self.dispatched_ns,
            &mut self.connect_start_ns,
            &mut self.connect_end_ns,
            &mut self.tls_done_ns,
            &mut self.request_written_ns,
            &mut self.response_head_ns,
            &mut self.first_content_ns,
            &mut self.terminal_ns,
            &mut self.connection_id,
        ] {
            *column = Column::filled(n, NONE, &place)?;
        }
        for column in [&mut self.bytes_sent, &mut self.bytes_received] {
            *column = Column::filled(n, 0, &place)?;
        }
        for column in [&mut self.content_events, &mut self.replica] {
            *column = Column::filled(n, 0, &place)?;
        }
        for column in [
            &mut self.usage_prompt_tokens,
            &mut self.usage_completion_tokens,
            &mut self.max_tokens,
            &mut self.prompt_tokens_sent,
            &mut self.stream_id,
        ] {
            *column = Column::filled(n, u32::MAX, &place)?;
        }
        self.http_status = Column::filled(n, 0, &place)?;
        self.protocol = vec![0; n];
        self.connection_reused = vec![false; n];
        let empty = self.details.id("");
        self.detail = Column::filled(n, empty, &place)?;
        Ok(())
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

    /// Writes a kind-8 stream record into row `row`, making the stream columns at the first.
    pub fn fill_stream(&mut self, row: usize, record: &StreamRecord) -> Result<(), SpillError> {
        if self.streams.is_none() {
            self.streams = Some(Streams::empty(self.len(), &self.place)?);
        }
        if let Some(streams) = self.streams.as_mut() {
            streams.fill(row, record);
        }
        Ok(())
    }

    /// When row `row`'s time to first token ends, ns from the epoch, under `reading` (SPEC §3):
    /// the first answer content event (v0.1-v0.4), or the first generated delta of any kind
    /// (A4; the first content event where the journal has no stream record for the row, as a
    /// journal before stream records has none); for a completion with neither (a body with no
    /// text, an empty stream), its terminal time.
    pub fn first_token_ns(&self, row: usize, reading: StreamReading) -> u64 {
        let content = self.first_content_ns[row];
        let first = match (reading, &self.streams) {
            (StreamReading::EveryDelta, Some(streams)) => streams.first_ns[row].min(content),
            _ => content,
        };
        if first == NONE {
            self.terminal_ns[row]
        } else {
            first
        }
    }

    /// Whether row `row`'s first token was seen (a content event, or under A4 a generated delta
    /// of any kind), rather than its TTFT falling back to its terminal time.
    pub fn first_token_seen(&self, row: usize, reading: StreamReading) -> bool {
        self.first_content_ns[row] != NONE
            || (reading == StreamReading::EveryDelta
                && self
                    .streams
                    .as_ref()
                    .is_some_and(|s| s.first_ns[row] != NONE))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_takes_the_bytes_the_budget_counts() {
        let mut one = Requests::with_capacity(1);
        one.push_scheduled(0, 0, 0, 0);
        one.reserve_records().unwrap();
        let r = &one;
        let wide = [
            &r.index,
            &r.intended_ns,
            &r.dispatched_ns,
            &r.connect_start_ns,
            &r.connect_end_ns,
            &r.tls_done_ns,
            &r.request_written_ns,
            &r.response_head_ns,
            &r.first_content_ns,
            &r.terminal_ns,
            &r.bytes_sent,
            &r.bytes_received,
            &r.connection_id,
        ]
        .map(|c| std::mem::size_of_val(&c[..]))
        .iter()
        .sum::<usize>();
        let four = [
            &r.route,
            &r.phase,
            &r.content_events,
            &r.usage_prompt_tokens,
            &r.usage_completion_tokens,
            &r.max_tokens,
            &r.prompt_tokens_sent,
            &r.stream_id,
            &r.replica,
            &r.detail,
        ]
        .map(|c| std::mem::size_of_val(&c[..]))
        .iter()
        .sum::<usize>();
        let narrow = std::mem::size_of_val(&r.class[..])
            + std::mem::size_of_val(&r.http_status[..])
            + r.outcome.len()
            + r.protocol.len()
            + std::mem::size_of_val(&r.connection_reused[..]);
        assert_eq!((wide + four + narrow) as u64, Requests::BYTES_PER_ROW);
    }
}
