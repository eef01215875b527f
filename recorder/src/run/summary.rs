//! What a finished run reports: the summary `percentes record` prints, and the exit status it
//! owes the run.

use std::path::PathBuf;

use percentes_formats::journal::records::SealStatus;
use percentes_formats::journal::writer::Sealed;

use std::sync::atomic::Ordering;

use super::signals::counts_line;
pub use super::state::FailureClass;
use super::state::Shared;

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The journal written.
    pub output: PathBuf,
    /// How it was sealed.
    pub status: SealStatus,
    /// Why it was sealed so.
    pub reason: String,
    /// What the seal reports (chain head, counts, size).
    pub sealed: Sealed,
    /// Requests never dispatched.
    pub undispatched: u64,
    /// Requests the run stopped before they were sent (SIGINT, SIGTERM, an escape): journaled
    /// censored, class `run-end`, and counted in the seal's censored; printed apart.
    pub not_sent: u64,
    /// Times the writer queue was full.
    pub queue_full_events: u64,
    /// The classes requests failed in (errored and censored), most frequent first.
    pub failures: Vec<FailureClass>,
    /// Idle connections the pool retired for their age (its idle limit or the server's
    /// `Keep-Alive: timeout`).
    pub pool_expired: u64,
    /// Idle connections found closed by the server before a send, and replaced.
    pub pool_found_closed: u64,
    /// Connections the spare keeper opened ahead of need, so no request waited for them.
    pub opened_ahead: u64,
    /// What the pre-flight established, if it ran.
    pub preflight: Option<String>,
}

impl Summary {
    /// The summary of the run written to `output`: its seal, and what the threads counted in
    /// `shared`.
    pub(super) fn of(
        output: PathBuf,
        (status, reason, sealed): (SealStatus, String, Sealed),
        shared: &Shared,
        preflight: Option<String>,
    ) -> Summary {
        Summary {
            output,
            status,
            reason,
            sealed,
            undispatched: shared.requests.undispatched.load(Ordering::Relaxed),
            not_sent: shared.requests.not_sent.load(Ordering::Relaxed),
            queue_full_events: shared.queue.full.load(Ordering::Relaxed),
            failures: shared.failure_classes(),
            pool_expired: shared.pool.expired.load(Ordering::Relaxed),
            pool_found_closed: shared.pool.found_closed.load(Ordering::Relaxed),
            opened_ahead: shared.pool.opened_ahead.load(Ordering::Relaxed),
            preflight,
        }
    }

    /// What `percentes record` prints at the end: the journal, the seal, the counts, the top
    /// failure classes, what the pool retired, the writer queue, and the chain head.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![
            format!("journal: {}", self.output.display()),
            if self.reason.is_empty() {
                format!("seal: {}", self.status.name())
            } else if self.reason.starts_with(self.status.name()) {
                // An escape's reason opens with its status (`escaped (trigger): ...`): once.
                format!("seal: {}", self.reason)
            } else {
                format!("seal: {} ({})", self.status.name(), self.reason)
            },
            self.counts(),
        ];
        out.extend(self.failure_lines(5).into_iter().map(|l| format!("  {l}")));
        if self.pool_expired + self.pool_found_closed + self.opened_ahead > 0 {
            out.push(format!(
                "pool: {} connections opened ahead of need, {} idle ones retired at their idle limit, {} found closed by the server and replaced before a send",
                self.opened_ahead, self.pool_expired, self.pool_found_closed
            ));
        }
        if self.queue_full_events > 0 {
            out.push(format!(
                "writer queue was full {} times (recorded in the journal; the run fails its gate)",
                self.queue_full_events
            ));
        }
        out.push(format!(
            "chain head (keep it outside the file; verify --expect-head): {}",
            percentes_formats::journal::hex(&self.sealed.chain_head)
        ));
        out
    }

    /// The seal's counts in words, the requests the run stopped before they were sent taken out
    /// of the censored and named for what they are (issue 54 item 3): 70 requests never sent
    /// read as "70 censored", as if the target had held them.
    fn counts(&self) -> String {
        let counts = &self.sealed.counts;
        if self.not_sent == 0 {
            return counts_line(counts);
        }
        format!(
            "{} requests: {} completed, {} errored, {} censored, {} undispatched, {} not sent (the run stopped before their turn)",
            counts.requests,
            counts.completed,
            counts.errored,
            counts.censored.saturating_sub(self.not_sent),
            counts.undispatched,
            self.not_sent
        )
    }

    /// The exit status `percentes record` owes this run (SPEC §10) and the warning that says
    /// why when it is not 0: 2 for an escaped experiment (a declared abort trigger fired;
    /// seeds/004 calls it invalid, not an error of the instrument) and for a request never
    /// dispatched (§2 fails the run); 1 for a journal sealed other than `completed`.
    pub fn exit(&self) -> (u8, Option<String>) {
        let client_behind = format!("({})", percentes_formats::journal::records::CLIENT_BEHIND);
        if self.status == SealStatus::Escaped && self.reason.contains(&client_behind) {
            return (
                2,
                Some("RUN INVALID (SPEC §2 \"Falling behind\"): the recorder fell behind its schedule and stopped offered load; the journal is sealed `escaped`, and nothing from it may be published. The client was unfit, not the target: see `percentes doctor`".into()),
            );
        }
        let unconfirmed = format!(
            "({})",
            percentes_formats::journal::records::IMPACT_UNCONFIRMED
        );
        if self.status == SealStatus::Escaped && self.reason.contains(&unconfirmed) {
            return (
                2,
                Some("RUN INVALID (seeds/004, SPEC §10 fault fidelity): the fault did not happen as planned (its impact was not confirmed, or its injector failed), so the recorder stopped offered load; the journal is sealed `escaped`, and nothing from it may be published. See the fault-failed event for why".into()),
            );
        }
        for subject in [
            percentes_formats::journal::records::BASELINE_UNHEALTHY,
            percentes_formats::journal::records::TELEMETRY_MISSING,
        ] {
            if self.status == SealStatus::Escaped && self.reason.contains(&format!("({subject})")) {
                return (
                    2,
                    Some(format!("RUN INVALID (seeds/004, SPEC §10): the recorder ended the run before injection ({subject}), so the fault was never fired; the journal is sealed `escaped`, and nothing from it may be published. The seal's reason and the escape event say what the baseline showed")),
                );
            }
        }
        if self.status == SealStatus::Escaped {
            return (
                2,
                Some("EXPERIMENT ESCAPED: a declared abort trigger fired; offered load stopped and the journal is sealed `escaped`. `percentes analyze` lists what incident response must retain".into()),
            );
        }
        if self.status != SealStatus::Completed {
            return (1, None);
        }
        if self.sealed.counts.undispatched > 0 {
            let late = self
                .failures
                .iter()
                .find(|f| f.class == "client-late")
                .map_or(0, |f| f.count);
            return (
                2,
                Some(format!(
                    "RUN INVALID (SPEC §2): {} scheduled requests were never dispatched{}; nothing from this run may be published",
                    self.sealed.counts.undispatched,
                    if late > 0 {
                        format!(" ({late} of them reached by the recorder only after their deadline: class client-late, the client's failure)")
                    } else {
                        String::new()
                    }
                )),
            );
        }
        (0, None)
    }

    /// The top failure classes in one line each: `42 refused: connection refused (os error 111)`.
    pub fn failure_lines(&self, top: usize) -> Vec<String> {
        self.failures
            .iter()
            .take(top)
            .map(|f| {
                if f.detail.is_empty() {
                    format!("{} {}", f.count, f.class)
                } else {
                    format!("{} {}: {}", f.count, f.class, f.detail)
                }
            })
            .collect()
    }
}
