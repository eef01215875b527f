//! The escape watch (seeds/004): on the journal writer thread, it sees every record in journal
//! order and fires a declared abort trigger once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use percentes_formats::config::Config;
use percentes_formats::journal::detail::DetailWord;
use percentes_formats::journal::records::{
    class_code, EventKind, EventRecord, Outcome, Record, RequestRecord,
};

use super::state::{Escape, Shared};

/// The declared abort triggers (seeds/004), watched on the writer thread, which sees every
/// record in the order it journals them. When one fires the watch journals an `escape` event,
/// notes the reason for the seal and raises the stop flag: dispatch stops, in-flight requests
/// drain, the fault plan runs its cleanup, and the journal is sealed `escaped`.
pub(super) struct EscapeWatch {
    pub(super) stop: Arc<AtomicBool>,
    /// Route index -> protected.
    pub(super) protected: Vec<bool>,
    pub(super) budget: Option<f64>,
    pub(super) window_ns: u64,
    pub(super) min_requests: usize,
    /// Protected requests ending in the window: (terminal_ns, failed).
    pub(super) recent: std::collections::VecDeque<(u64, bool)>,
    pub(super) failed_in_window: usize,
    /// The declared target, when errors elsewhere are a trigger.
    pub(super) undeclared: Option<String>,
    pub(super) cleanup: bool,
    pub(super) fired: bool,
}

impl EscapeWatch {
    pub(super) fn new(config: &Config, stop: Arc<AtomicBool>) -> Option<EscapeWatch> {
        let d = config.declaration.as_ref()?;
        let a = &d.abort;
        Some(EscapeWatch {
            stop,
            protected: config
                .routes
                .iter()
                .map(|r| d.protected_routes.contains(&r.label))
                .collect(),
            budget: a.protected_failure_rate,
            window_ns: (a.window_s * 1e9 / f64::from(config.time_factor)) as u64,
            min_requests: a.min_requests.max(1) as usize,
            recent: std::collections::VecDeque::new(),
            failed_in_window: 0,
            undeclared: a.undeclared_replica_errors.then(|| d.target.clone()),
            cleanup: a.cleanup_failure,
            fired: false,
        })
    }

    /// What the journal writer does with each record before it appends it (the recorder's
    /// writer thread and the simulation alike): looks at it, and when a trigger fires, notes the
    /// escape for the seal (the first escape names it: the fall-behind policy may have fired
    /// first) and returns the `escape` event to journal after the record.
    pub(super) fn escape_after(&mut self, record: &Record, shared: &Shared) -> Option<Record> {
        let event = self.observe(record)?;
        shared.note_escape(Escape {
            subject: event.subject.clone(),
            detail: event.detail.clone(),
        });
        Some(Record::Event(event))
    }

    /// Looks at one record about to be journaled; returns the escape event when a trigger fires.
    pub(super) fn observe(&mut self, record: &Record) -> Option<EventRecord> {
        if self.fired {
            return None;
        }
        let (trigger, at_ns, detail) = match record {
            Record::Request(r) => self.observe_request(r)?,
            Record::Event(e)
                if self.cleanup
                    && e.is(EventKind::FaultFailed)
                    && DetailWord::RemovalFailed.opens(&e.detail) =>
            {
                (
                    "cleanup-failed",
                    e.at_ns,
                    format!("cleanup cannot restore state: {}", e.detail),
                )
            }
            _ => return None,
        };
        self.fired = true;
        self.stop.store(true, Ordering::SeqCst);
        Some(EventRecord {
            at_ns,
            kind: EventKind::Escape.code(),
            subject: trigger.into(),
            detail,
            value: None,
        })
    }

    pub(super) fn observe_request(
        &mut self,
        r: &RequestRecord,
    ) -> Option<(&'static str, u64, String)> {
        // Neither a request the stop censored nor one the client itself was late for (SPEC §2
        // "The client's lateness is the client's") says anything of the target or of the
        // protected traffic: they count on neither side of the share. A client behind its
        // schedule fails G2 and has its own escape (the fall-behind policy). Before, a
        // `client-late` request (outcome undispatched, never a failure) counted as one that did
        // not fail, so a stalled client diluted the share and could hide the target's failures.
        let clients = [class_code("run-end"), class_code("client-late")];
        if clients.contains(&Some(r.class)) {
            return None;
        }
        let errored = r.outcome == Outcome::Errored as u8;
        if let Some(target) = &self.undeclared {
            if errored && !r.replica.is_empty() && r.replica != *target {
                return Some((
                    "undeclared-replica",
                    r.terminal_ns,
                    format!(
                        "request {} errored on {}, outside the declared target {target}: {}",
                        r.index, r.replica, r.detail
                    ),
                ));
            }
        }
        let budget = self.budget?;
        if !self
            .protected
            .get(r.route as usize)
            .copied()
            .unwrap_or(false)
        {
            return None;
        }
        let failed = errored || r.outcome == Outcome::Censored as u8;
        self.recent.push_back((r.terminal_ns, failed));
        self.failed_in_window += usize::from(failed);
        while let Some(&(at, f)) = self.recent.front() {
            if at + self.window_ns >= r.terminal_ns {
                break;
            }
            self.recent.pop_front();
            self.failed_in_window -= usize::from(f);
        }
        let n = self.recent.len();
        let share = self.failed_in_window as f64 / n as f64;
        (n >= self.min_requests && share > budget).then(|| {
            (
                "protected-budget",
                r.terminal_ns,
                format!(
                    "protected traffic over its abort budget: {} of the {n} protected requests ending in the last {:.3} s failed ({share:.4} > {budget}); the last, request {}, {}",
                    self.failed_in_window,
                    self.window_ns as f64 / 1e9,
                    r.index,
                    if r.detail.is_empty() { "no detail" } else { r.detail.as_str() }
                ),
            )
        })
    }
}
