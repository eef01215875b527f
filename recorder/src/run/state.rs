//! What the recorder's threads share: the counters workers, telemetry and progress read
//! ([`Shared`]), and the writer's queue ([`Sender`], [`ToWriter`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use percentes_formats::journal::records::{
    EventKind, EventRecord, Outcome, Record, RequestRecord, SealStatus,
};
use percentes_formats::journal::WriteError;

use super::baseline::BaselineTally;
use super::behind::Fired;
use super::dispatch::StallPool;
use super::live;
use super::signals::say;

/// Boxed: the bounded queue preallocates every slot, and records vary from tens of bytes to kilobytes.
pub(super) enum ToWriter {
    Record(Box<Record>),
    /// A worker's finished records, handed over together: one wake-up of the writer per batch
    /// rather than per request (a context switch per request dominated the recorder's CPU).
    Batch(Vec<Record>),
    Finish(SealStatus, String),
}

/// What the recorder's threads share, in parts by the thread that writes each: the workers'
/// request counts and samples, the writer queue's depth (written by every [`Sender`]), the
/// connection pools' counts, and the run's state (its escape, the writer's failure, where each
/// worker waits). Readers are the telemetry thread, the live view and `record`'s summary.
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Written by the workers as requests go out and end.
    pub(super) requests: RequestCounts,
    /// Written by the workers (skew, TTFT, stall ticks, canary lags) and taken by the
    /// telemetry thread each second.
    pub(super) samples: Samples,
    /// Written by every sender to the writer's queue.
    pub(super) queue: QueueCounts,
    /// Written by the workers' connection pools.
    pub(super) pool: PoolCounts,
    /// The fault's state as the journal has it ([`live::FaultState::code`]), written by the
    /// senders of fault events.
    pub(super) fault_state: std::sync::atomic::AtomicU8,
    /// Set by `record` once the workers are done.
    pub(super) done: AtomicBool,
    /// The first escape (the fall-behind policy, an unconfirmed fault, a declared abort
    /// trigger): it names the seal; set once ([`Shared::note_escape`]).
    pub(super) escaped: Mutex<Option<Escape>>,
    /// The journal writer's first failure; dispatch stops when it is set.
    pub(super) writer_failed: Mutex<Option<Arc<WriteError>>>,
    /// Per worker: the intended time (ns from the epoch) of the request it waits to send, or
    /// `u64::MAX` once it has reached its last; the fall-behind policy judges a starved worker,
    /// and the live view says how far behind schedule the run is, by it.
    pub(super) waiting_ns: Box<[AtomicU64]>,
    /// The baseline as the writer has journaled it, for the judgement at T_inject (a fault run's
    /// coordinator only).
    pub(super) baseline: Option<Mutex<BaselineTally>>,
}

/// The requests' counts, written by the workers.
#[derive(Debug, Default)]
pub(super) struct RequestCounts {
    pub(super) sent: AtomicU64,
    /// Follow-ups handed an index so far (closed and semi-open workloads): the next one's
    /// index is the schedule's request count plus this.
    pub(super) follow_ups: AtomicU64,
    pub(super) in_flight: AtomicU64,
    pub(super) completed: AtomicU64,
    pub(super) errored: AtomicU64,
    pub(super) censored: AtomicU64,
    /// Of the censored, those the run stopped before they were sent (class `run-end`, never
    /// dispatched): not sent, rather than censored, in what `record` prints.
    pub(super) not_sent: AtomicU64,
    pub(super) undispatched: AtomicU64,
    /// Errored and censored requests by class: count, and the first one's detail.
    pub(super) failures: Mutex<std::collections::BTreeMap<&'static str, (u64, String)>>,
    /// Set the first time the client runs out of descriptors or ports (said once, loudly).
    pub(super) exhausted: AtomicBool,
}

/// One class of failed requests in a run's summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureClass {
    /// The class name (`refused`, `timeout`, ...).
    pub class: &'static str,
    /// Requests that ended in it.
    pub count: u64,
    /// The first such request's detail.
    pub detail: String,
}

/// What the workers measure between two telemetry seconds, taken by the telemetry thread.
#[derive(Debug, Default)]
pub(super) struct Samples {
    /// Send skew, ns.
    pub(super) skew_ns: Mutex<Vec<u64>>,
    /// TTFT of the requests completed since the last telemetry tick (the live view), ns.
    pub(super) ttft_ns: Mutex<Vec<u64>>,
    /// The stall ticks' lateness, ns.
    pub(super) stall_ns: Mutex<Vec<u64>>,
    /// The canary's lags (ns) since the last telemetry tick, from every worker.
    pub(super) canary_ns: Mutex<Vec<u64>>,
    /// The stall ticker pooled over the measured span, for the gate's exact p99 (SPEC §2),
    /// written by the telemetry thread.
    pub(super) stall_pool: Mutex<StallPool>,
}

/// The writer queue's depth, written by every [`Sender`].
#[derive(Debug, Default)]
pub(super) struct QueueCounts {
    pub(super) depth: AtomicU64,
    /// The queue's largest depth since the telemetry thread last read it (JOURNAL.md's
    /// `writer_queue_max`: the interval's peak).
    pub(super) peak: AtomicU64,
    /// Sends that found the queue full and waited.
    pub(super) full: AtomicU64,
}

/// What the workers' connection pools did.
#[derive(Debug, Default)]
pub(super) struct PoolCounts {
    /// Idle connections retired for their age.
    pub(super) expired: AtomicU64,
    /// Idle connections found closed (or written to) by the server, retired before a send.
    pub(super) found_closed: AtomicU64,
    /// Connections the spare keeper opened ahead of need.
    pub(super) opened_ahead: AtomicU64,
}

impl Shared {
    /// Counters for `workers` workers, none of them waiting yet, with the baseline's tally when
    /// this recorder judges one.
    pub(super) fn new(workers: usize, baseline: Option<BaselineTally>) -> Shared {
        Shared {
            waiting_ns: (0..workers).map(|_| AtomicU64::new(u64::MAX)).collect(),
            baseline: baseline.map(Mutex::new),
            ..Shared::default()
        }
    }

    /// Counts a finished request that did not complete, by class.
    pub(super) fn tally(&self, record: &RequestRecord) {
        if record.outcome == Outcome::Completed as u8 {
            return;
        }
        let Some(class) = percentes_formats::journal::records::class_name(record.class) else {
            return;
        };
        let mut failures = self.requests.failures.lock().expect("failures lock");
        let entry = failures
            .entry(class)
            .or_insert_with(|| (0, record.detail.clone()));
        entry.0 += 1;
    }

    /// The client could not open a connection for want of descriptors or ports: say so once,
    /// now, on stderr (the requests are recorded undispatched, which fails the run's G2).
    pub(super) fn note_exhaustion(&self, error: &std::io::Error) {
        if !self.requests.exhausted.swap(true, Ordering::Relaxed) {
            say(&format!(
                "percentes: the client ran out of connections ({error}): requests are recorded undispatched and the run fails G2 (SPEC §2); raise the open-file limit (ulimit -n) or lower the rate"
            ));
        }
    }

    pub(super) fn failure_classes(&self) -> Vec<FailureClass> {
        let failures = self.requests.failures.lock().expect("failures lock");
        let mut out: Vec<FailureClass> = failures
            .iter()
            .map(|(class, (count, detail))| FailureClass {
                class,
                count: *count,
                detail: detail.clone(),
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.class.cmp(b.class)));
        out
    }

    /// The fall-behind policy fired (SPEC §2 "Falling behind"): once per run, journal the
    /// `escape` event (trigger `client-behind`), note the seal's reason, say it, and stop
    /// offered load. A declared trigger that fired first keeps its place.
    pub(super) fn fell_behind(
        &self,
        sender: &Sender,
        stop: &AtomicBool,
        at_ns: u64,
        fired: Fired,
        lag_ns: u64,
    ) {
        let detail = fired.detail(lag_ns);
        let subject = percentes_formats::journal::records::CLIENT_BEHIND;
        let value = i64::try_from(fired.late_ns).ok();
        self.abort(
            sender,
            stop,
            (at_ns, subject, &detail, value),
            "Offered load stopped; the journal is sealed escaped and nothing from it may be published (SPEC §2 \"Falling behind\")",
        );
    }

    /// The recorder's own abort, said: [`Shared::escape`], and the first time, `detail` and
    /// then `consequence` on stderr.
    pub(super) fn abort(
        &self,
        sender: &Sender,
        stop: &AtomicBool,
        event: (u64, &str, &str, Option<i64>),
        consequence: &str,
    ) {
        let detail = event.2;
        if self.escape(sender, stop, event) {
            say(&format!("percentes: {detail}. {consequence}"));
        }
    }

    /// The recorder's own abort (the fall-behind policy, an unconfirmed impact): journal an
    /// `escape` event (at, subject, detail, value), note the seal's reason and stop offered
    /// load. `false`, doing nothing, when an escape already fired: the first keeps its place.
    pub(super) fn escape(
        &self,
        sender: &Sender,
        stop: &AtomicBool,
        (at_ns, subject, detail, value): (u64, &str, &str, Option<i64>),
    ) -> bool {
        let escape = Escape {
            subject: subject.into(),
            detail: detail.into(),
        };
        if !self.note_escape(escape) {
            return false;
        }
        sender.send(Record::Event(EventRecord {
            at_ns,
            kind: EventKind::Escape.code(),
            subject: subject.into(),
            detail: detail.into(),
            value,
        }));
        stop.store(true, Ordering::SeqCst);
        true
    }

    /// Notes `escape` as the run's, unless one was noted before (the first names the seal):
    /// whether it was.
    pub(super) fn note_escape(&self, escape: Escape) -> bool {
        let mut escaped = self.escaped.lock().expect("escape lock");
        if escaped.is_some() {
            return false;
        }
        *escaped = Some(escape);
        true
    }

    /// How far behind schedule the slowest worker is now: the time since the intended time of
    /// the request it waits to send, when that has passed, ns.
    pub(super) fn behind_ns(&self, now_ns: u64) -> u64 {
        self.waiting_ns
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .filter(|&w| w != u64::MAX)
            .map(|w| now_ns.saturating_sub(w))
            .max()
            .unwrap_or(0)
    }
}

#[derive(Clone)]
pub(super) struct Sender {
    pub(super) tx: SyncSender<ToWriter>,
    pub(super) shared: Arc<Shared>,
    /// Raised if the writer is gone: nothing more could be recorded, so nothing more is sent.
    pub(super) stop: Arc<AtomicBool>,
}

impl Sender {
    /// Hands a record to the writer. A full queue blocks (nothing is dropped) and is counted, so
    /// telemetry records a writer-queue-full event.
    pub(super) fn send(&self, record: Record) {
        if let Record::Event(e) = &record {
            let state = match EventKind::from_code(e.kind) {
                Some(EventKind::FaultArmed) => Some(live::FaultState::Armed),
                Some(EventKind::FaultFired) => Some(live::FaultState::Fired),
                Some(EventKind::FaultRemoved | EventKind::FaultExpired) => {
                    Some(live::FaultState::Removed)
                }
                Some(EventKind::FaultFailed) => Some(live::FaultState::Failed),
                _ => None,
            };
            if let Some(state) = state {
                self.shared
                    .fault_state
                    .store(state.code(), Ordering::Relaxed);
            }
        }
        self.send_message(ToWriter::Record(Box::new(record)), 1);
    }

    pub(super) fn send_batch(&self, records: Vec<Record>) {
        if !records.is_empty() {
            let n = records.len() as u64;
            self.send_message(ToWriter::Batch(records), n);
        }
    }

    pub(super) fn send_message(&self, message: ToWriter, records: u64) {
        let depth = self
            .shared
            .queue
            .depth
            .fetch_add(records, Ordering::Relaxed)
            + records;
        self.shared.queue.peak.fetch_max(depth, Ordering::Relaxed);
        match self.tx.try_send(message) {
            Ok(()) => {}
            Err(TrySendError::Full(message)) => {
                self.shared.queue.full.fetch_add(1, Ordering::Relaxed);
                let _ = self.tx.send(message);
            }
            Err(TrySendError::Disconnected(_)) => self.stop.store(true, Ordering::SeqCst),
        }
    }
}

/// Why the recorder ended a run itself, as its `escape` event says it: the trigger (`subject`:
/// `client-behind`, `impact-unconfirmed`, a declared abort trigger's name...) and its words. The
/// seal's reason opens with it ([`Escape::seal_reason`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Escape {
    /// The trigger, as the escape event's subject.
    pub(super) subject: String,
    /// What fired it, as the escape event's detail.
    pub(super) detail: String,
}

impl Escape {
    /// The seal's reason for an escaped run, before what the recorder did next.
    pub(super) fn seal_reason(&self) -> String {
        format!("escaped ({}): {}", self.subject, self.detail)
    }
}
