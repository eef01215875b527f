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

use percentes_formats::spec::{ErrorTreatment, Rules};

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
    pub fn of(rules: &Rules) -> Method {
        match rules.curve {
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
        CompletionCurve {
            method,
            n: sorted.len() as u64,
            steps: Steps::over(&sorted, method).collect(),
        }
    }

    /// The curve over `observations` with only the steps that its readings consult, which every
    /// one of them answers exactly as the whole curve does:
    ///
    /// - for each incidence in `crossings`, the first step that reaches it (what
    ///   [`super::quantile::read`] finds for a crossing test `incidence >= q - tolerance`, when
    ///   given `q - tolerance`);
    /// - for each time in `times`, the last step at or before it and the first after it (what
    ///   [`CompletionCurve::at`] and a risk-set lookup read);
    /// - the last step (the final incidence and the ceiling).
    ///
    /// A window of ten million requests has about that many distinct times, and the whole curve
    /// would hold 56 bytes for each (BENCHMARKS.md, "Where the memory goes"); this one holds a few
    /// hundred steps, and sorts `observations` in place.
    pub fn estimate_thinned(
        mut observations: Vec<Observation>,
        method: Method,
        crossings: &[f64],
        times: &[u64],
    ) -> CompletionCurve {
        observations.sort_unstable_by_key(|o| o.time_ns);
        let mut times = times.to_vec();
        times.sort_unstable();
        times.dedup();
        let mut crossed = vec![false; crossings.len()];
        // The first time not yet passed by a step: at or after the previous step's time.
        let mut pending = 0;
        let mut steps = Vec::new();
        // The step before the current one, and whether it is kept.
        let mut previous: Option<(Step, bool)> = None;
        for step in Steps::over(&observations, method) {
            let passes_a_time = times.get(pending).is_some_and(|&t| step.time_ns > t);
            while times.get(pending).is_some_and(|&t| t < step.time_ns) {
                pending += 1;
            }
            let mut crosses = false;
            for (&level, done) in crossings.iter().zip(&mut crossed) {
                if !*done && step.incidence >= level {
                    *done = true;
                    crosses = true;
                }
            }
            if passes_a_time && let Some((before, false)) = previous {
                steps.push(before);
            }
            let keep = passes_a_time || crosses;
            if keep {
                steps.push(step);
            }
            previous = Some((step, keep));
        }
        if let Some((last, false)) = previous {
            steps.push(last);
        }
        CompletionCurve {
            method,
            n: observations.len() as u64,
            steps,
        }
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

/// The curve's steps in time order, made one at a time from observations already sorted by time:
/// the one implementation of the estimator, which [`CompletionCurve::estimate`] collects whole
/// and a caller that needs only some steps (the readings and the grid of a window of ten million
/// requests) can read in one pass without holding them all.
#[derive(Clone, Debug)]
pub struct Steps<'a> {
    sorted: &'a [Observation],
    method: Method,
    next: usize,
    at_risk: u64,
    event_free: f64,
    error_incidence: f64,
    incidence: f64,
}

impl<'a> Steps<'a> {
    /// The steps over `sorted`, which must be in time order (ties in any order).
    pub fn over(sorted: &'a [Observation], method: Method) -> Steps<'a> {
        debug_assert!(sorted.windows(2).all(|p| p[0].time_ns <= p[1].time_ns));
        Steps {
            sorted,
            method,
            next: 0,
            at_risk: sorted.len() as u64,
            event_free: 1.0,
            error_incidence: 0.0,
            incidence: 0.0,
        }
    }
}

impl Iterator for Steps<'_> {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        let first = self.sorted.get(self.next)?;
        let time_ns = first.time_ns;
        let (mut completed, mut errored, mut censored) = (0u64, 0u64, 0u64);
        while let Some(o) = self.sorted.get(self.next).filter(|o| o.time_ns == time_ns) {
            match o.fate {
                Fate::Completed => completed += 1,
                Fate::Errored => errored += 1,
                Fate::Censored => censored += 1,
            }
            self.next += 1;
        }
        let n_j = self.at_risk as f64;
        self.incidence = match self.method {
            Method::AalenJohansen => {
                if completed + errored > 0 {
                    self.error_incidence += self.event_free * errored as f64 / n_j;
                    self.event_free *= 1.0 - (completed + errored) as f64 / n_j;
                }
                if completed > 0 {
                    (1.0 - self.event_free) - self.error_incidence
                } else {
                    // The curve moves only at completions. Recomputing (1 - S) - E at an
                    // error-only step is the same number in exact arithmetic but can round a few
                    // ulps off it (even below zero); carry the previous value instead.
                    self.incidence
                }
            }
            Method::KaplanMeierErrorsCensored => {
                if completed > 0 {
                    self.event_free *= 1.0 - completed as f64 / n_j;
                }
                1.0 - self.event_free
            }
        };
        let step = Step {
            time_ns,
            at_risk: self.at_risk,
            completed,
            errored,
            censored,
            incidence: self.incidence,
            event_free: self.event_free,
        };
        self.at_risk -= completed + errored + censored;
        Some(step)
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

    /// A fixed pseudo-random window: times on a coarse grid so that ties are common, all three
    /// fates, and runs of error-only steps (where the Aalen-Johansen curve carries its value).
    fn random_window(seed: u64, n: usize) -> Vec<Observation> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let time_ns = (x >> 33) % 400 * 1_000_000;
                let fate = match (x >> 20) % 10 {
                    0..=6 => Fate::Completed,
                    7 | 8 => Fate::Errored,
                    _ => Fate::Censored,
                };
                Observation { time_ns, fate }
            })
            .collect()
    }

    #[test]
    fn the_steps_iterator_is_the_estimate() {
        for method in [Method::AalenJohansen, Method::KaplanMeierErrorsCensored] {
            let window = random_window(7, 2_000);
            let mut sorted = window.clone();
            sorted.sort_unstable_by_key(|o| o.time_ns);
            let steps: Vec<Step> = Steps::over(&sorted, method).collect();
            assert_eq!(steps, CompletionCurve::estimate(&window, method).steps);
            assert!(Steps::over(&[], method).next().is_none());
        }
    }

    #[test]
    fn a_thinned_curve_reads_exactly_as_the_whole_curve() {
        use crate::estimate::quantile::read;
        let tolerance = 1e-9;
        let quantiles = [0.1, 0.5, 0.6, 0.7, 0.9, 0.95, 0.99, 0.999];
        let crossings: Vec<f64> = quantiles.iter().map(|q| q - tolerance).collect();
        // A grid like the report's, a time at a step exactly, one before every step, one past
        // the last, out of order and repeated.
        let mut times: Vec<u64> = (1..=40).map(|k| k * 10_000_000).collect();
        times.extend([
            1_000_000_000,
            7_000_000,
            0,
            999_000_000,
            7_000_000,
            200_000_000,
        ]);
        for seed in 1..=20 {
            for method in [Method::AalenJohansen, Method::KaplanMeierErrorsCensored] {
                let window = random_window(seed, 50 + 97 * seed as usize);
                let whole = CompletionCurve::estimate(&window, method);
                let thin =
                    CompletionCurve::estimate_thinned(window.clone(), method, &crossings, &times);
                assert_eq!(thin.n, whole.n);
                assert!(
                    thin.steps.len() < whole.steps.len(),
                    "seed {seed}: nothing thinned"
                );
                for &q in &quantiles {
                    for horizon in [150_000_000, 30_000_000_000] {
                        assert_eq!(
                            read(&thin, q, horizon, tolerance),
                            read(&whole, q, horizon, tolerance),
                            "seed {seed} {method:?} q {q}"
                        );
                    }
                }
                let first_after = |c: &CompletionCurve, t: u64| {
                    c.steps.iter().find(|s| s.time_ns > t).map(|s| s.at_risk)
                };
                for &t in &times {
                    assert_eq!(
                        thin.at(t).to_bits(),
                        whole.at(t).to_bits(),
                        "seed {seed} at {t}"
                    );
                    assert_eq!(
                        first_after(&thin, t),
                        first_after(&whole, t),
                        "seed {seed} {t}"
                    );
                }
                assert_eq!(
                    thin.final_incidence().to_bits(),
                    whole.final_incidence().to_bits()
                );
                assert_eq!(thin.ceiling().to_bits(), whole.ceiling().to_bits());
            }
        }
        let empty =
            CompletionCurve::estimate_thinned(Vec::new(), Method::AalenJohansen, &[0.5], &[1]);
        assert_eq!(empty, CompletionCurve::estimate(&[], Method::AalenJohansen));
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
