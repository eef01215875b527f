//! What one request row says: completed, its TTFT and end-to-end latency from t_i, its SLO input,
//! and outcome counts over rows.

use std::borrow::Cow;

use percentes_formats::journal::records::Outcome;
use percentes_formats::spec::StreamReading;

use crate::estimate::slo::{Completed, SloInput};
use crate::frame::{Requests, NONE};
use crate::model::Outcomes;

/// Nanoseconds as seconds.
pub(super) fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

pub(super) fn completed(requests: &Requests, row: usize) -> bool {
    requests.outcome(row) == Some(Outcome::Completed)
}

/// TTFT from t_i of a completed request, ending where `reading` says (SPEC §3): its first
/// answer content event, or (A4) its first generated delta of any kind; for a non-streamed
/// response, the body.
pub(super) fn ttft_ns(requests: &Requests, row: usize, reading: StreamReading) -> Option<u64> {
    completed(requests, row).then(|| {
        requests
            .first_token_ns(row, reading)
            .saturating_sub(requests.intended_ns[row])
    })
}

/// Whether a completed request's first token was seen (rather than its TTFT falling back to its
/// completion): what TPOT needs.
pub(super) fn first_token_seen(requests: &Requests, row: usize, reading: StreamReading) -> bool {
    requests.first_token_seen(row, reading)
}

pub(super) fn e2e_ns(requests: &Requests, row: usize) -> Option<u64> {
    completed(requests, row)
        .then(|| requests.terminal_ns[row].saturating_sub(requests.intended_ns[row]))
}

/// Time per output token of a completed request, ns: (e2e - TTFT) / (completion tokens - 1),
/// where it reported at least two tokens and its first token was seen (SPEC §9).
pub(super) fn tpot_ns(requests: &Requests, row: usize, reading: StreamReading) -> Option<u64> {
    let tokens = completion_tokens(requests, row).filter(|&t| t >= 2)?;
    if !first_token_seen(requests, row, reading) {
        return None;
    }
    let span = e2e_ns(requests, row)?.saturating_sub(ttft_ns(requests, row, reading)?);
    Some(span / (tokens - 1))
}

/// The first answer delta of a row, ns from the epoch: its stream record's, or without one its
/// first content event (A4); `None` where no answer came.
pub(super) fn first_answer_ns(requests: &Requests, row: usize) -> Option<u64> {
    let recorded = requests.streams.as_ref().filter(|s| s.kinds[row] != 0);
    let first = recorded.map_or(requests.first_content_ns[row], |s| s.first_answer_ns[row]);
    (first != NONE).then_some(first)
}

pub(super) fn slo_input(requests: &Requests, row: usize, reading: StreamReading) -> SloInput {
    SloInput {
        completed: ttft_ns(requests, row, reading)
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

/// A4 (v0.5, SPEC §1 "Abandonment"): `outcomes` of `rows` with the requests the client closed
/// at their drawn instant (class `abandoned`) counted apart from the censored ones.
pub(super) fn abandoned_apart(requests: &Requests, rows: &[usize], outcomes: &mut Outcomes) {
    let code = percentes_formats::journal::records::class_code("abandoned");
    let n = rows
        .iter()
        .filter(|&&row| {
            requests.outcome(row) == Some(Outcome::Censored) && Some(requests.class[row]) == code
        })
        .count() as u64;
    outcomes.censored -= n;
    outcomes.abandoned += n;
}

/// A4 (v0.5): what the schedule's abandonment did over `rows`, where it declares one: the
/// requests it marked (recomputed from the seed, JOURNAL.md "Schedule" rule 7), those the
/// client closed at their instant, and those that ended first.
pub(super) fn abandonment(
    run: &crate::load::Run,
    rows: &[usize],
) -> Option<crate::model::AbandonReport> {
    let params = &run.header.schedule;
    let abandon = params.abandon?;
    let requests = &run.requests;
    let code = percentes_formats::journal::records::class_code("abandoned");
    let mut out = crate::model::AbandonReport {
        marked: 0,
        abandoned: 0,
        ended_first: 0,
    };
    for &row in rows {
        if abandon.draw(params.seed, requests.index[row]).is_none() {
            continue;
        }
        out.marked += 1;
        match requests.outcome(row) {
            Some(Outcome::Censored) if Some(requests.class[row]) == code => out.abandoned += 1,
            Some(Outcome::Undispatched) | None => {}
            Some(_) => out.ended_first += 1,
        }
    }
    Some(out)
}

/// The completed requests' latencies of one window, each sorted ascending, in µs (the unit of
/// the report's distributions), and the same in intended-time order; with the scheduled
/// requests' outcomes as positions in that order: what `percentes compare` tests, request by
/// request (A4: its effective sample sizes read the orders).
#[derive(Clone, Debug, Default)]
pub struct LatencySamples {
    /// Time to first token from t_i.
    pub ttft_us: Vec<u64>,
    /// Time per output token, of the requests with usage and at least two tokens.
    pub tpot_us: Vec<u64>,
    /// End to end from t_i.
    pub e2e_us: Vec<u64>,
    /// The three above in intended-time order, unsorted.
    pub in_order: [Vec<u64>; 3],
    /// How many requests were scheduled in the window.
    pub scheduled: usize,
    /// Positions, among the scheduled in intended-time order, of those that errored, were
    /// censored, and met the pinned SLO (§4).
    pub errored: Vec<usize>,
    /// See `errored`.
    pub censored: Vec<usize>,
    /// See `errored`.
    pub met: Vec<usize>,
}

/// [`LatencySamples`] of the requests whose intended time falls in `[start_ns, end_ns)`, by the
/// same rules as the report's distributions (TPOT as `tokens.rs` computes it) under `reading`.
pub fn latency_samples(
    run: &crate::load::Run,
    (start_ns, end_ns): (u64, u64),
    reading: StreamReading,
) -> LatencySamples {
    use crate::estimate::histogram::ns_to_us;
    use crate::estimate::slo::{Completed, Slo};
    let requests = &run.requests;
    let mut out = LatencySamples::default();
    let rows: Vec<usize> = (0..requests.len())
        .filter(|&row| (start_ns..end_ns).contains(&requests.intended_ns[row]))
        .collect();
    let slo = Slo::pinned();
    for (at, &row) in in_intended_order(requests, &rows).iter().enumerate() {
        out.scheduled += 1;
        match requests.outcome(row) {
            Some(Outcome::Errored) => out.errored.push(at),
            Some(Outcome::Censored) => out.censored.push(at),
            _ => {}
        }
        let (Some(ttft), Some(e2e)) = (ttft_ns(requests, row, reading), e2e_ns(requests, row))
        else {
            continue;
        };
        let completed = Some(Completed {
            ttft_ns: ttft,
            e2e_ns: e2e,
        });
        if slo.met_by(&SloInput { completed }) {
            out.met.push(at);
        }
        out.ttft_us.push(ns_to_us(ttft));
        out.e2e_us.push(ns_to_us(e2e));
        if let Some(tpot) = tpot_ns(requests, row, reading) {
            out.tpot_us.push(ns_to_us(tpot));
        }
    }
    out.in_order = [out.ttft_us.clone(), out.tpot_us.clone(), out.e2e_us.clone()];
    out.ttft_us.sort_unstable();
    out.tpot_us.sort_unstable();
    out.e2e_us.sort_unstable();
    out
}

/// A request's completion tokens, if its response reported usage.
pub(super) fn completion_tokens(requests: &Requests, row: usize) -> Option<u64> {
    let tokens = requests.usage_completion_tokens[row];
    (tokens != u32::MAX).then_some(u64::from(tokens))
}

/// A request's tokens per content event, when usage says it carried more than one token per
/// chunk on average (1 otherwise, or when unknown). Under A4 the events are the deltas of every
/// kind, which the usage's completion tokens count (reasoning included).
pub(super) fn tokens_per_event(requests: &Requests, row: usize, reading: StreamReading) -> f64 {
    let events = match (reading, &requests.streams) {
        (StreamReading::EveryDelta, Some(s)) if s.kinds[row] != 0 => s.deltas(row),
        _ => u64::from(requests.content_events[row]),
    };
    match completion_tokens(requests, row) {
        Some(tokens) if events > 0 && tokens > events => tokens as f64 / events as f64,
        _ => 1.0,
    }
}

/// `rows` in intended-time order (ties by row), borrowed where they already are: the order
/// §7's effective sample size reads a window's series in (A4).
pub(super) fn in_intended_order<'a>(requests: &Requests, rows: &'a [usize]) -> Cow<'a, [usize]> {
    let at = |r: usize| (requests.intended_ns[r], r);
    if rows.windows(2).all(|w| at(w[0]) <= at(w[1])) {
        return Cow::Borrowed(rows);
    }
    let mut sorted = rows.to_vec();
    sorted.sort_unstable_by_key(|&r| at(r));
    Cow::Owned(sorted)
}
