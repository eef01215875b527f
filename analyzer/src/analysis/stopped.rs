//! A run stopped before its schedule's end (SPEC §3 "A run stopped before its end", A4, v0.5):
//! the requests it never sent are not sent, not censored. The recorder journals each censored,
//! class `run-end`, never dispatched (SIGINT, SIGTERM, an escape, the fall-behind policy);
//! under v0.1 to v0.4 they are censored like any other, so a run stopped 7 s into 20 read
//! "censored 88.61 %, SLO goodput 11.39 %" for requests that never left the client. Under v0.5
//! they leave every window's rows, each window is cut at the stop, and the count is said apart.

use percentes_formats::journal::records::{class_code, Outcome};
use percentes_formats::spec::{Rules, StopReading};

use crate::frame::{Requests, NONE};
use crate::windows::Window;

/// Whether `row` is a request the run stopped before sending: censored, class `run-end`, never
/// dispatched (the same under every version; what a version makes of it is [`apply`]'s).
pub(super) fn not_sent(requests: &Requests, row: usize) -> bool {
    requests.outcome(row) == Some(Outcome::Censored)
        && Some(requests.class[row]) == class_code("run-end")
        && requests.dispatched_ns[row] == NONE
}

/// Where the run stopped and what it left unsent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stop {
    /// The first unsent request's intended time: the stop, ns from the epoch.
    pub(super) at_ns: u64,
    /// Requests not sent.
    pub(super) not_sent: u64,
}

/// Under [`StopReading::NotSent`], takes the unsent requests out of `rows_of` and returns the
/// windows cut at the stop (a window that starts after it is left empty, its end at its start),
/// with the stop; under [`StopReading::Censored`], or where nothing went unsent, the windows as
/// they are and no stop.
pub(super) fn apply(
    requests: &Requests,
    rules: &Rules,
    cut: &[Window],
    rows_of: &mut [Vec<usize>],
) -> (Vec<Window>, Option<Stop>) {
    if rules.stopped != StopReading::NotSent {
        return (cut.to_vec(), None);
    }
    let unsent: Vec<usize> = (0..requests.len())
        .filter(|&row| not_sent(requests, row))
        .collect();
    let Some(at_ns) = unsent.iter().map(|&row| requests.intended_ns[row]).min() else {
        return (cut.to_vec(), None);
    };
    for rows in rows_of.iter_mut() {
        rows.retain(|&row| !not_sent(requests, row));
    }
    let clipped = cut
        .iter()
        .map(|w| Window {
            end_ns: w.end_ns.min(at_ns.max(w.start_ns)),
            ..*w
        })
        .collect();
    let stop = Stop {
        at_ns,
        not_sent: unsent.len() as u64,
    };
    (clipped, Some(stop))
}
