//! The completion curve (SPEC §3, amendment A1).
//!
//! Under v0.2, the Aalen-Johansen estimate of the cumulative incidence of completion: errors are
//! competing terminal events, only censored requests are censored. Under v0.1, the Kaplan-Meier
//! curve with errors treated as censored (kept so archived journals can be re-analyzed as they
//! were).
//!
//! At each distinct time t_j (exact equality of integer nanoseconds is a tie), with n_j requests
//! at risk (time >= t_j, so a request censored at t_j is still at risk for the events at t_j),
//! d_c completions and d_e errors sharing that one risk set:
//!
//! - event-free survival `S(t_j) = S(t_{j-1}) * (1 - (d_c + d_e) / n_j)`;
//! - error incidence `E(t_j) = E(t_{j-1}) + S(t_{j-1}) * d_e / n_j`;
//! - completion incidence `F(t_j) = (1 - S(t_j)) - E(t_j)`.
//!
//! The last line is the Aalen-Johansen sum `sum S(t_{k-1}) d_c / n_k` rewritten through
//! `F + E = 1 - S`; written this way, a window without errors gives exactly `1 - S`, the
//! Kaplan-Meier complement, to the last bit.
//!
//! ```
//! use percentes_analyzer::estimate::incidence::{CompletionCurve, Fate, Method, Observation};
//! // A1's counterexample: 50 errors at 0.5 s, 50 completions at 1 s.
//! let mut obs = vec![Observation { time_ns: 500_000_000, fate: Fate::Errored }; 50];
//! obs.extend(vec![Observation { time_ns: 1_000_000_000, fate: Fate::Completed }; 50]);
//! assert_eq!(CompletionCurve::estimate(&obs, Method::AalenJohansen).final_incidence(), 0.5);
//! assert_eq!(CompletionCurve::estimate(&obs, Method::KaplanMeierErrorsCensored).final_incidence(), 1.0);
//! ```

use percentes_formats::spec::{ErrorTreatment, Spec};

/// What happened to one scheduled request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fate {
    /// Completed at `time_ns`.
    Completed,
    /// Failed at `time_ns`: a competing event under v0.2, a censoring under v0.1.
    Errored,
    /// No outcome by `time_ns`: still at risk until then.
    Censored,
}

/// One scheduled request on the latency axis: time since its intended send time t_i, to its
/// completion, its failure, or its censoring cutoff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Its time, ns from t_i.
    pub time_ns: u64,
    /// How it ended.
    pub fate: Fate,
}

/// The estimator a spec version prescribes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// SPEC v0.2: errors compete.
    AalenJohansen,
    /// SPEC v0.1: errors treated as censored (overstates completion; A1).
    KaplanMeierErrorsCensored,
}

impl Method {
    /// The estimator a spec version's rule for errors prescribes.
    pub fn for_spec(spec: Spec) -> Method {
        match spec.errors_on_the_curve() {
            ErrorTreatment::Compete => Method::AalenJohansen,
            ErrorTreatment::Censored => Method::KaplanMeierErrorsCensored,
        }
    }
}

/// The curve after everything that happened at one distinct time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// The distinct time, ns from t_i.
    pub time_ns: u64,
    /// Requests at risk just before this time (time >= this time).
    pub at_risk: u64,
    /// Completions at it.
    pub completed: u64,
    /// Errors at it.
    pub errored: u64,
    /// Censorings at it.
    pub censored: u64,
    /// Completion incidence after this time.
    pub incidence: f64,
    /// Event-free survival after this time: the share still able to complete. Under v0.1 this is
    /// the Kaplan-Meier survival with errors censored.
    pub event_free: f64,
}

/// A window's completion curve: a right-continuous step function starting at 0.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletionCurve {
    /// The estimator the curve was drawn with.
    pub method: Method,
    /// Scheduled requests the curve is over.
    pub n: u64,
    /// One step per distinct time at which anything happened, in time order.
    pub steps: Vec<Step>,
}

impl CompletionCurve {
    /// Estimates the curve over every observation of a window.
    pub fn estimate(observations: &[Observation], method: Method) -> CompletionCurve {
        let mut sorted: Vec<Observation> = observations.to_vec();
        sorted.sort_unstable_by_key(|o| o.time_ns);
        let n = sorted.len() as u64;
        let mut steps = Vec::new();
        let mut at_risk = n;
        let mut event_free = 1.0f64;
        let mut error_incidence = 0.0f64;
        let mut i = 0;
        while i < sorted.len() {
            let time_ns = sorted[i].time_ns;
            let (mut completed, mut errored, mut censored) = (0u64, 0u64, 0u64);
            while i < sorted.len() && sorted[i].time_ns == time_ns {
                match sorted[i].fate {
                    Fate::Completed => completed += 1,
                    Fate::Errored => errored += 1,
                    Fate::Censored => censored += 1,
                }
                i += 1;
            }
            let n_j = at_risk as f64;
            let incidence = match method {
                Method::AalenJohansen => {
                    if completed + errored > 0 {
                        error_incidence += event_free * errored as f64 / n_j;
                        event_free *= 1.0 - (completed + errored) as f64 / n_j;
                    }
                    if completed > 0 {
                        (1.0 - event_free) - error_incidence
                    } else {
                        // The curve moves only at completions. Recomputing (1 - S) - E at an
                        // error-only step is the same number in exact arithmetic but can round
                        // a few ulps off it (even below zero); carry the previous value instead.
                        steps.last().map_or(0.0, |s: &Step| s.incidence)
                    }
                }
                Method::KaplanMeierErrorsCensored => {
                    if completed > 0 {
                        event_free *= 1.0 - completed as f64 / n_j;
                    }
                    1.0 - event_free
                }
            };
            steps.push(Step {
                time_ns,
                at_risk,
                completed,
                errored,
                censored,
                incidence,
                event_free,
            });
            at_risk -= completed + errored + censored;
        }
        CompletionCurve { method, n, steps }
    }

    /// The completion incidence at `time_ns` (0 before the first step).
    pub fn at(&self, time_ns: u64) -> f64 {
        match self.steps.partition_point(|s| s.time_ns <= time_ns) {
            0 => 0.0,
            k => self.steps[k - 1].incidence,
        }
    }

    /// The incidence at the curve's end.
    pub fn final_incidence(&self) -> f64 {
        self.steps.last().map_or(0.0, |s| s.incidence)
    }

    /// The highest the curve could ever reach (SPEC §3): the final incidence plus the event-free
    /// survival remaining at the curve's end. With no event after the last censoring, the
    /// remainder is the censored fraction. Under v0.1 it is always 1 (errors never consume mass).
    pub fn ceiling(&self) -> f64 {
        match self.steps.last() {
            None => 0.0,
            Some(last) => last.incidence + last.event_free,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Fate::{Censored as C, Completed as D, Errored as E};

    fn obs(list: &[(u64, Fate)]) -> Vec<Observation> {
        list.iter()
            .map(|&(time_ns, fate)| Observation { time_ns, fate })
            .collect()
    }

    /// One line per oracle: observations, then (time, incidence) pairs computed by hand.
    fn check(list: &[(u64, Fate)], method: Method, expected: &[(u64, f64)]) {
        let curve = CompletionCurve::estimate(&obs(list), method);
        let got: Vec<(u64, f64)> = curve
            .steps
            .iter()
            .map(|s| (s.time_ns, s.incidence))
            .collect();
        assert_eq!(got.len(), expected.len(), "{got:?}");
        for ((t, f), (et, ef)) in got.iter().zip(expected) {
            assert_eq!(t, et);
            assert!((f - ef).abs() < 1e-15, "at {t}: {f} vs {ef} (all: {got:?})");
        }
    }

    #[test]
    fn a1_counterexample() {
        let mut list = vec![(500, E); 50];
        list.extend(vec![(1000, D); 50]);
        check(&list, Method::AalenJohansen, &[(500, 0.0), (1000, 0.5)]);
        check(
            &list,
            Method::KaplanMeierErrorsCensored,
            &[(500, 0.0), (1000, 1.0)],
        );
    }

    #[test]
    fn hand_computed_with_censoring() {
        // n = 5: completion at 1; error at 2; censored at 3; completions at 4 and 5.
        // AJ: S: 1 -> 4/5 -> 3/5 -> (3) -> 3/5 * 1/2 = 3/10 -> 0.
        // F: 1/5; 1/5; 1/5; 1/5 + 3/5 * 1/2 = 1/2; 1/2 + 3/10 = 4/5. E = 1/5.
        let list = [(1, D), (2, E), (3, C), (4, D), (5, D)];
        check(
            &list,
            Method::AalenJohansen,
            &[(1, 0.2), (2, 0.2), (3, 0.2), (4, 0.5), (5, 0.8)],
        );
        // v0.1: error censored. S: 4/5; (error leaves) ; (censor leaves) ; at 4: n = 2 -> 4/5 * 1/2 = 2/5; at 5: 0.
        check(
            &list,
            Method::KaplanMeierErrorsCensored,
            &[(1, 0.2), (2, 0.2), (3, 0.2), (4, 0.6), (5, 1.0)],
        );
    }

    #[test]
    fn ties_events_before_censorings_and_one_risk_set() {
        // n = 6, all at time 10 except one completion at 20:
        // at 10: n = 6, two completions, one error, two censored (still at risk at 10).
        // S(10) = 1 - 3/6 = 1/2; E = 1/6; F = 1 - 1/2 - 1/6 = 1/3.
        // at 20: n = 1 (6 - 5), one completion: S = 0, F = 1 - 0 - 1/6 = 5/6.
        let list = [(10, D), (10, D), (10, E), (10, C), (10, C), (20, D)];
        check(
            &list,
            Method::AalenJohansen,
            &[(10, 1.0 / 3.0), (20, 5.0 / 6.0)],
        );
        let curve = CompletionCurve::estimate(&obs(&list), Method::AalenJohansen);
        assert_eq!(
            curve.steps[0].at_risk, 6,
            "censored at 10 are at risk for the events at 10"
        );
        assert_eq!(curve.steps[1].at_risk, 1);
    }

    #[test]
    fn ceiling_and_final_incidence() {
        // 10 requests: 6 complete by 5, 2 errors, 2 censored at the end (30).
        let mut list = vec![
            (1, D),
            (2, D),
            (3, D),
            (4, D),
            (5, D),
            (5, D),
            (6, E),
            (7, E),
        ];
        list.extend([(30, C), (30, C)]);
        let curve = CompletionCurve::estimate(&obs(&list), Method::AalenJohansen);
        assert!((curve.final_incidence() - 0.6).abs() < 1e-15);
        assert!(
            (curve.ceiling() - 0.8).abs() < 1e-15,
            "censored fraction 0.2 remains"
        );
        let v01 = CompletionCurve::estimate(&obs(&list), Method::KaplanMeierErrorsCensored);
        assert!((v01.ceiling() - 1.0).abs() < 1e-15);
    }

    #[test]
    fn empty_and_all_censored() {
        let empty = CompletionCurve::estimate(&[], Method::AalenJohansen);
        assert_eq!((empty.final_incidence(), empty.ceiling()), (0.0, 0.0));
        let censored = CompletionCurve::estimate(&obs(&[(30, C), (30, C)]), Method::AalenJohansen);
        assert_eq!((censored.final_incidence(), censored.ceiling()), (0.0, 1.0));
        assert_eq!(censored.at(0), 0.0);
    }

    /// Error-only steps carry the curve unchanged: exactly 0 before the first completion (never a
    /// rounding residue like -1e-17), exactly the last value after the last one.
    #[test]
    fn error_only_steps_leave_the_curve_exactly_where_it_was() {
        let mut list: Vec<(u64, Fate)> = (1..=7).map(|t| (t, E)).collect();
        list.extend((8..=10).map(|t| (t, D)));
        list.extend((11..=13).map(|t| (t, E)));
        let curve = CompletionCurve::estimate(&obs(&list), Method::AalenJohansen);
        for step in &curve.steps[..7] {
            assert_eq!(step.incidence.to_bits(), 0.0f64.to_bits(), "{step:?}");
        }
        let last_completion = curve.steps[9].incidence;
        for step in &curve.steps[10..] {
            assert_eq!(step.incidence.to_bits(), last_completion.to_bits());
        }
        assert!((last_completion - 3.0 / 13.0).abs() < 1e-15);
    }
}
