//! What one request row says: completed, its TTFT and end-to-end latency from t_i, its SLO input,
//! and outcome counts over rows.

use percentes_formats::journal::records::Outcome;

use crate::estimate::slo::{Completed, SloInput};
use crate::frame::{Requests, NONE};
use crate::model::*;

/// Nanoseconds as seconds.
pub(super) fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

pub(super) fn completed(requests: &Requests, row: usize) -> bool {
    requests.outcome(row) == Some(Outcome::Completed)
}

/// TTFT from t_i of a completed request (its first content event; for a non-streamed response,
/// the body).
pub(super) fn ttft_ns(requests: &Requests, row: usize) -> Option<u64> {
    let first = requests.first_content_ns[row];
    let first = if first == NONE {
        requests.terminal_ns[row]
    } else {
        first
    };
    completed(requests, row).then(|| first.saturating_sub(requests.intended_ns[row]))
}

pub(super) fn e2e_ns(requests: &Requests, row: usize) -> Option<u64> {
    completed(requests, row)
        .then(|| requests.terminal_ns[row].saturating_sub(requests.intended_ns[row]))
}

pub(super) fn slo_input(requests: &Requests, row: usize) -> SloInput {
    SloInput {
        completed: ttft_ns(requests, row)
            .zip(e2e_ns(requests, row))
            .map(|(ttft_ns, e2e_ns)| Completed { ttft_ns, e2e_ns }),
    }
}

pub(super) fn count_outcomes(requests: &Requests, rows: impl Iterator<Item = usize>) -> Outcomes {
    let mut o = Outcomes::default();
    for row in rows {
        match requests.outcome(row) {
            Some(Outcome::Completed) => o.completed += 1,
            Some(Outcome::Errored) => o.errored += 1,
            Some(Outcome::Censored) => o.censored += 1,
            Some(Outcome::Undispatched) => o.undispatched += 1,
            None => o.no_record += 1,
        }
    }
    o
}
