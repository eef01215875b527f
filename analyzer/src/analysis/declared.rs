//! A4 (v0.5): goodput under the user's declared SLO, and both goodputs' intervals (SPEC §4 "A
//! declared SLO").
//!
//! A scheduled request meets the declared SLO iff it completed and every objective of its
//! route holds on its own value of the objective's metric. A metric the journal cannot give for
//! a completed request (no usage for TPOT, no answer for the first answer token, a stream whose
//! deliveries were listed in part for the longest gap) is not guessed: the request does not
//! meet the SLO, and the report counts it as unjudged on that metric. Errored, censored and
//! undispatched requests are in the denominator and never in the numerator, as for the pinned
//! SLO (§4).

use std::collections::BTreeMap;

use percentes_formats::config::slo::{DeclaredSlo, Objective, SloMetric};
use percentes_formats::pins;
use percentes_formats::spec::{GoodputReading, Rules, StreamReading};

use super::rows::{
    completed, e2e_ns, first_answer_ns, in_intended_order, slo_input, tpot_ns, ttft_ns,
};
use crate::estimate::slo::{goodput_interval, GoodputInterval, Slo};
use crate::frame::Requests;
use crate::load::Run;
use crate::model::{DeclaredGoodput, Share, ShareInterval, WindowReport};

/// A row's longest gap between deliveries is unknown: its stream record lists only part of
/// them ([`percentes_formats::journal::stream::DELIVERIES_MAX`]).
pub(super) const GAP_UNKNOWN: u32 = u32::MAX;

const LAG_MAX: usize = pins::value::STATISTICS_TAIL_LAG_MAX as usize;

/// What the declared goodput is, in words.
const DECLARED: &str = "requests that completed within every objective of the declared SLO (their route's own where it has one), over all scheduled requests (§4 \"A declared SLO\")";

/// How one scheduled request stands against the declared SLO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Met,
    Missed,
    /// Every objective it could be judged on held, and this metric could not be read.
    Unjudged(SloMetric),
}

/// The declared SLO's judge over one run's request table.
pub(super) struct Judge<'a> {
    requests: &'a Requests,
    slo: &'a DeclaredSlo,
    /// Each route's label, by its index in the configuration.
    labels: Vec<&'a str>,
    reading: StreamReading,
    /// Whether the run asked for streamed responses (a body's first answer token is its end).
    streamed: bool,
    /// Each row's longest gap between deliveries, us ([`GAP_UNKNOWN`] where unknown); empty
    /// when no objective bounds it.
    longest_gap_us: &'a [u32],
}

/// One entry per row where the run's declared SLO bounds the longest gap (and `rules` read a
/// declared SLO), for the second pass to fill; else empty.
pub(super) fn longest_gaps_wanted(run: &Run, rules: &Rules) -> Vec<u32> {
    match declared_slo(run, rules) {
        Some(slo) if slo.metrics().contains(&SloMetric::Itl) => vec![0; run.requests.len()],
        _ => Vec::new(),
    }
}

fn declared_slo<'a>(run: &'a Run, rules: &Rules) -> Option<&'a DeclaredSlo> {
    let read = rules.goodput == GoodputReading::PinnedAndDeclared;
    run.config.slo.as_ref().filter(|_| read)
}

/// A4: a window's goodput interval, and its declared goodput where a judge is given.
pub(super) fn fill(
    report: &mut WindowReport,
    run: &Run,
    rows: &[usize],
    (rules, judge): (&Rules, Option<&Judge<'_>>),
) {
    if rules.goodput != GoodputReading::PinnedAndDeclared {
        return;
    }
    let ordered = in_intended_order(&run.requests, rows);
    report.goodput_interval = Some(pinned_interval(&run.requests, &ordered, rules.streams));
    report.declared_goodput = judge.map(|j| j.goodput(&ordered));
}

impl<'a> Judge<'a> {
    /// The judge of `run`'s declared SLO under `rules`, `None` where there is none to read;
    /// `longest_gap_us` from [`longest_gaps_wanted`], filled by the second pass.
    pub(super) fn of(run: &'a Run, rules: &Rules, longest_gap_us: &'a [u32]) -> Option<Self> {
        Some(Judge {
            requests: &run.requests,
            slo: declared_slo(run, rules)?,
            labels: run.config.routes.iter().map(|r| r.label.as_str()).collect(),
            reading: rules.streams,
            streamed: run.config.target.stream,
            longest_gap_us,
        })
    }
}

impl Judge<'_> {
    /// A completed row's value of `metric`, ns; `None` where the journal cannot give it.
    fn value_ns(&self, row: usize, metric: SloMetric) -> Option<u64> {
        let r = self.requests;
        match metric {
            SloMetric::Ttft => ttft_ns(r, row, self.reading),
            SloMetric::E2e => e2e_ns(r, row),
            SloMetric::Ttfat if !self.streamed => e2e_ns(r, row),
            SloMetric::Ttfat => {
                first_answer_ns(r, row).map(|first| first.saturating_sub(r.intended_ns[row]))
            }
            SloMetric::Tpot => tpot_ns(r, row, self.reading),
            SloMetric::Itl => self
                .longest_gap_us
                .get(row)
                .filter(|&&gap| gap != GAP_UNKNOWN)
                .map(|&gap| u64::from(gap) * 1_000),
        }
    }

    fn objectives(&self, row: usize) -> &[Objective] {
        let route = usize::try_from(self.requests.route[row]).unwrap_or(usize::MAX);
        match self.labels.get(route) {
            Some(label) => self.slo.for_route(label),
            None => &self.slo.objectives,
        }
    }

    fn verdict(&self, row: usize) -> Verdict {
        if !completed(self.requests, row) {
            return Verdict::Missed;
        }
        let mut unread = None;
        for objective in self.objectives(row) {
            match self.value_ns(row, objective.metric) {
                Some(value) if !objective.met_by(value) => return Verdict::Missed,
                Some(_) => {}
                None => unread = unread.or(Some(objective.metric)),
            }
        }
        unread.map_or(Verdict::Met, Verdict::Unjudged)
    }

    /// The declared goodput of a window's rows, given in intended-time order.
    pub(super) fn goodput(&self, ordered: &[usize]) -> DeclaredGoodput {
        let mut met = Vec::new();
        let mut unjudged = BTreeMap::new();
        for (at, &row) in ordered.iter().enumerate() {
            match self.verdict(row) {
                Verdict::Met => met.push(at),
                Verdict::Missed => {}
                Verdict::Unjudged(metric) => {
                    *unjudged.entry(metric.name().to_owned()).or_insert(0) += 1;
                }
            }
        }
        let n = ordered.len();
        DeclaredGoodput {
            slo: self.slo.to_string(),
            goodput: Share {
                value: (n > 0).then(|| met.len() as f64 / n as f64),
                n: n as u64,
                label: DECLARED,
            },
            interval: interval(n, &met),
            unjudged,
        }
    }
}

/// The pinned SLO's goodput interval over a window's rows, given in intended-time order.
pub(super) fn pinned_interval(
    requests: &Requests,
    ordered: &[usize],
    reading: StreamReading,
) -> ShareInterval {
    let slo = Slo::pinned();
    let met: Vec<usize> = ordered
        .iter()
        .enumerate()
        .filter(|&(_, &row)| slo.met_by(&slo_input(requests, row, reading)))
        .map(|(at, _)| at)
        .collect();
    interval(ordered.len(), &met)
}

fn interval(n: usize, met: &[usize]) -> ShareInterval {
    match goodput_interval(n, met, LAG_MAX) {
        GoodputInterval::Interval {
            low,
            high,
            n_per_effective,
        } => ShareInterval {
            interval: Some((low, high)),
            n_per_effective: Some(n_per_effective),
            refused: None,
        },
        GoodputInterval::Empty => ShareInterval {
            interval: None,
            n_per_effective: None,
            refused: Some("nothing scheduled in the window".into()),
        },
        GoodputInterval::Correlated => ShareInterval {
            interval: None,
            n_per_effective: None,
            refused: Some(format!(
                "the window's outcomes are still correlated {LAG_MAX} requests apart (statistics.tail_lag_max): no effective n, so no interval (§7)"
            )),
        },
    }
}
