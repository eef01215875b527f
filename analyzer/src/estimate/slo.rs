//! The SLO, goodput, the threshold sweep and the modal-latency distance (SPEC §4).
//!
//! A request meets the SLO iff it completed, its time to first token is at most the TTFT
//! threshold and its end-to-end latency at most the e2e threshold (both from t_i). Goodput is the
//! share of a window's *scheduled* requests that meet it: errored, censored and undispatched
//! requests count in the denominator and never in the numerator. Every threshold comes from
//! `percentes_formats::pins`.

use percentes_formats::pins;

const NS_PER_MS: u64 = 1_000_000;

/// A pinned number of milliseconds as nanoseconds (every time pin is positive).
const fn pin_ms(ms: i64) -> u64 {
    ms.unsigned_abs() * NS_PER_MS
}

/// One scheduled request as the SLO sees it. Latencies are from the intended send time t_i.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SloInput {
    /// Present only for completed requests.
    pub completed: Option<Completed>,
}

/// A completed request's two latencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// Time to first token, ns from t_i.
    pub ttft_ns: u64,
    /// End-to-end latency, ns from t_i.
    pub e2e_ns: u64,
}

/// An SLO: both thresholds inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slo {
    /// The TTFT threshold, ns.
    pub ttft_ns: u64,
    /// The end-to-end threshold, ns.
    pub e2e_ns: u64,
}

impl Slo {
    /// The pinned SLO (`slo.ttft_ms`, `slo.e2e_ms`).
    pub fn pinned() -> Slo {
        Slo {
            ttft_ns: pin_ms(pins::value::SLO_TTFT_MS),
            e2e_ns: pin_ms(pins::value::SLO_E2E_MS),
        }
    }

    /// Whether `request` completed within both thresholds.
    pub fn met_by(self, request: &SloInput) -> bool {
        request
            .completed
            .is_some_and(|c| c.ttft_ns <= self.ttft_ns && c.e2e_ns <= self.e2e_ns)
    }
}

/// A window as goodput sees it: how many requests were scheduled, and the two latencies of each
/// one that completed (parallel slices, one entry per completed request, in the same order).
/// Errored, censored and undispatched requests are counted in `scheduled` alone, since they never
/// meet an SLO; so a window of ten million requests is read from the latencies the window's
/// distributions need anyway, not from a second per-request copy.
#[derive(Clone, Copy, Debug)]
pub struct Completions<'a> {
    /// Every scheduled request of the window.
    pub scheduled: usize,
    /// Time to first token of each completed request, ns from t_i.
    pub ttft_ns: &'a [u64],
    /// End-to-end latency of each completed request, ns from t_i (parallel to `ttft_ns`).
    pub e2e_ns: &'a [u64],
}

impl Completions<'_> {
    /// How many completed requests met `slo`.
    pub fn met(&self, slo: Slo) -> usize {
        self.ttft_ns
            .iter()
            .zip(self.e2e_ns)
            .filter(|&(&ttft_ns, &e2e_ns)| {
                slo.met_by(&SloInput {
                    completed: Some(Completed { ttft_ns, e2e_ns }),
                })
            })
            .count()
    }
}

/// Goodput over a window's scheduled requests: `None` for an empty window (no ratio exists).
pub fn goodput(slo: Slo, window: Completions<'_>) -> Option<f64> {
    (window.scheduled > 0).then(|| window.met(slo) as f64 / window.scheduled as f64)
}

/// A goodput's 95 % interval under A4 (SPEC §4, §7): requests that share a batch share its
/// fate, so a window's "met" series, in intended-time order, is read for its effective n (the
/// long-run variance of a 0/1 series, [`super::effective::exceedances`]), the count and its n
/// divided by the design effect n / n_eff as Rao and Scott read clustered binary data, and
/// Wilson's score interval taken at z = 1.96 on what remains (as `compare` reads a share).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GoodputInterval {
    /// The interval, with n / n_eff.
    Interval {
        /// Its lower and upper ends, shares in 0..=1.
        low: f64,
        /// See `low`.
        high: f64,
        /// The design effect n / n_eff (1 where nothing shows a correlation).
        n_per_effective: f64,
    },
    /// Nothing scheduled: no share, no interval.
    Empty,
    /// The series is still correlated at the longest lag read (`statistics.tail_lag_max`): no
    /// effective n, so no interval.
    Correlated,
}

/// The interval of a goodput of `met` (positions among `n` scheduled requests in intended-time
/// order, ascending), the series read to lag `lag_max` at most.
pub fn goodput_interval(n: usize, met: &[usize], lag_max: usize) -> GoodputInterval {
    if n == 0 {
        return GoodputInterval::Empty;
    }
    // A 0/1 series and its complement share their autocovariances: the shorter is read.
    let missed: Vec<usize>;
    let positions = if met.len() * 2 > n {
        let mut next = met.iter().copied().peekable();
        missed = (0..n)
            .filter(|&i| {
                if next.peek() == Some(&i) {
                    next.next();
                    false
                } else {
                    true
                }
            })
            .collect();
        &missed
    } else {
        met
    };
    let Some(n_eff) = super::effective::exceedances(n, positions, lag_max).n_eff else {
        return GoodputInterval::Correlated;
    };
    let (k, m) = super::compare::effective_count(met.len() as u64, n as u64, n_eff);
    match super::compare::wilson(k, m, super::tails::Z_95) {
        Some((low, high)) => GoodputInterval::Interval {
            low,
            high,
            n_per_effective: n as f64 / n_eff.max(1e-300),
        },
        None => GoodputInterval::Empty,
    }
}

/// The sweep's thresholds, ns: (TTFT, e2e), each lowest, the SLO's, highest.
pub fn sweep_thresholds_ns() -> ([u64; 3], [u64; 3]) {
    (
        pins::SLO_SWEEP_TTFT_MS.map(pin_ms),
        pins::SLO_SWEEP_E2E_MS.map(pin_ms),
    )
}

/// Goodput at every cell of the 3 x 3 sweep: `[ttft][e2e]`.
pub fn sweep(window: Completions<'_>) -> [[Option<f64>; 3]; 3] {
    let (ttft, e2e) = sweep_thresholds_ns();
    ttft.map(|ttft_ns| e2e.map(|e2e_ns| goodput(Slo { ttft_ns, e2e_ns }, window)))
}

/// The distance of the fault window's modal latency from a threshold, in baseline standard
/// deviations: positive when the mode is below the threshold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distance {
    /// `(threshold - mode) / sd`; a zero SD gives a signed infinity (or 0 when mode = threshold).
    StandardDeviations {
        /// The modal latency, ns.
        mode_ns: u64,
        /// The baseline's standard deviation, ns.
        sd_ns: f64,
        /// The distance, in standard deviations.
        distance: f64,
    },
    /// Fewer than 2 baseline completions or no fault-window completion.
    InsufficientCompletedSamples,
}

/// The modal latency: the centre of the densest bin of width 1 % of the median (at least 1 ms),
/// bins anchored at 0; the lowest such bin on a tie. The median is the lower median
/// (the value of rank ceil(n/2)). `None` for no samples.
pub fn modal_latency_ns(latencies_ns: &[u64]) -> Option<u64> {
    if latencies_ns.is_empty() {
        return None;
    }
    let mut sorted = latencies_ns.to_vec();
    sorted.sort_unstable();
    let median = sorted[sorted.len().div_ceil(2) - 1];
    // 1 % of the median, as an integer division so no float rounding moves a bin edge.
    let divisor = (1.0 / pins::value::SLO_MODAL_BIN_FRACTION).round() as u64;
    let width = (median / divisor).max(pin_ms(pins::value::SLO_MODAL_BIN_FLOOR_MS));
    let mut best = (0u64, 0usize); // (bin, count)
    let mut i = 0;
    while i < sorted.len() {
        let bin = sorted[i] / width;
        let start = i;
        while i < sorted.len() && sorted[i] / width == bin {
            i += 1;
        }
        if i - start > best.1 {
            best = (bin, i - start);
        }
    }
    Some(best.0 * width + width / 2)
}

/// Sample standard deviation (n - 1), for n >= 2.
pub fn sample_sd(values_ns: &[u64]) -> Option<f64> {
    if values_ns.len() < 2 {
        return None;
    }
    let n = values_ns.len() as f64;
    let mean = values_ns.iter().map(|&v| v as f64).sum::<f64>() / n;
    let ss: f64 = values_ns.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
    Some((ss / (n - 1.0)).sqrt())
}

/// SPEC §4's distance for one latency (TTFT or e2e) and one threshold.
pub fn modal_distance(baseline_ns: &[u64], fault_ns: &[u64], threshold_ns: u64) -> Distance {
    let (Some(sd_ns), Some(mode_ns)) = (sample_sd(baseline_ns), modal_latency_ns(fault_ns)) else {
        return Distance::InsufficientCompletedSamples;
    };
    let gap = threshold_ns as f64 - mode_ns as f64;
    let distance = if sd_ns == 0.0 {
        if gap == 0.0 {
            0.0
        } else {
            gap.signum() * f64::INFINITY
        }
    } else {
        gap / sd_ns
    };
    Distance::StandardDeviations {
        mode_ns,
        sd_ns,
        distance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn goodput_counts_every_scheduled_request() {
        // 4 scheduled: one meets, one too slow to first token, one errored (scheduled, not
        // completed), one at both limits.
        let ttft = [200, 1_001, 1_000].map(|ms| ms * MS);
        let e2e = [5_000, 5_000, 14_000].map(|ms| ms * MS);
        let window = Completions {
            scheduled: 4,
            ttft_ns: &ttft,
            e2e_ns: &e2e,
        };
        assert_eq!(goodput(Slo::pinned(), window), Some(0.5));
        let empty = Completions {
            scheduled: 0,
            ttft_ns: &[],
            e2e_ns: &[],
        };
        assert_eq!(goodput(Slo::pinned(), empty), None);
        // Scheduled requests that all failed: a ratio of zero, not an absent one.
        let failed = Completions {
            scheduled: 3,
            ..empty
        };
        assert_eq!(goodput(Slo::pinned(), failed), Some(0.0));
        let cells = sweep(window);
        assert_eq!(cells[0][0], Some(0.25), "800 ms / 12 s: only the fast one");
        assert_eq!(
            cells[2][2],
            Some(0.75),
            "1500 ms / 18 s: all but the failure"
        );
        assert_eq!(cells[1][1], goodput(Slo::pinned(), window));
        assert_eq!(sweep_thresholds_ns().0, [800 * MS, 1_000 * MS, 1_500 * MS]);
        assert_eq!(
            sweep_thresholds_ns().1,
            [12_000 * MS, 14_000 * MS, 18_000 * MS]
        );
    }

    /// By hand. Outcomes with no positive correlation (one met in three 62 times, then one in
    /// four 19 times, then a miss: Geyer's first pair is already below zero, checked with a
    /// 15-line Python transcription of `effective.rs`'s estimator): n_eff = n, and the interval is Wilson's at 81 of 263 (Newcombe's single-proportion
    /// example, 0.2553 to 0.3662). Outcomes in alternating runs of ten (a square wave
    /// of period 20): the lag-k autocorrelation is 1 - k/5, Geyer's pairs are 1.8, 1.0, 0.2 and
    /// then -1.0, where the sequence stops, and the design effect is -1 + 2 (3.0) = 5 (5.03 with
    /// the finite series' autocovariances, n_eff 198.8, the same in the Python transcription):
    /// 500 of 1000 read as 100 of 199, Wilson's 0.4337 to 0.5713 where the independent reading
    /// would say 0.469 to 0.531. A series correlated past the longest lag read has no interval.
    #[test]
    fn goodput_interval_by_hand() {
        // 81 met of 263, spread so that no lag shows a positive correlation.
        let met: Vec<usize> = (0..62)
            .map(|k| 3 * k)
            .chain((0..19).map(|k| 186 + 4 * k))
            .collect();
        assert_eq!((met.len(), met.last()), (81, Some(&258)));
        match goodput_interval(263, &met, 2048) {
            GoodputInterval::Interval {
                low,
                high,
                n_per_effective,
            } => {
                assert_eq!(n_per_effective, 1.0);
                assert!((low - 0.2553).abs() < 5e-5 && (high - 0.3662).abs() < 5e-5);
            }
            other => panic!("{other:?}"),
        }
        // Half met, in runs of ten: 500 of 1000.
        let runs: Vec<usize> = (0..1000).filter(|i| (i / 10) % 2 == 0).collect();
        let GoodputInterval::Interval {
            low,
            high,
            n_per_effective,
        } = goodput_interval(1000, &runs, 2048)
        else {
            panic!("an interval")
        };
        assert!((n_per_effective - 5.03).abs() < 0.01, "{n_per_effective}");
        assert!(
            (low - 0.4337).abs() < 5e-5 && (high - 0.5713).abs() < 5e-5,
            "{low} {high}"
        );
        // The complement is read when most met: the same design effect mirrored.
        let most: Vec<usize> = (0..1000).filter(|i| (i / 10) % 4 != 0).collect();
        let least: Vec<usize> = (0..1000).filter(|i| (i / 10) % 4 == 0).collect();
        let (
            GoodputInterval::Interval {
                low: l1, high: h1, ..
            },
            GoodputInterval::Interval {
                low: l2, high: h2, ..
            },
        ) = (
            goodput_interval(1000, &most, 2048),
            goodput_interval(1000, &least, 2048),
        )
        else {
            panic!("intervals")
        };
        assert!((l1 - (1.0 - h2)).abs() < 1e-12 && (h1 - (1.0 - l2)).abs() < 1e-12);
        // Every request met: Wilson's upper end is 1, its lower below.
        let all: Vec<usize> = (0..50).collect();
        let GoodputInterval::Interval { low, high, .. } = goodput_interval(50, &all, 2048) else {
            panic!("an interval")
        };
        assert!(high == 1.0 && low < 1.0 && low > 0.9, "{low}");
        assert_eq!(goodput_interval(0, &[], 2048), GoodputInterval::Empty);
        // One long block: correlated past a short lag limit.
        let block: Vec<usize> = (0..500).collect();
        assert_eq!(
            goodput_interval(1000, &block, 8),
            GoodputInterval::Correlated
        );
    }

    #[test]
    fn modal_latency_by_hand() {
        // Median 50.3 ms: 1 % is 0.503 ms, under the 1 ms floor, so bins are 1 ms wide.
        // Bin 50 ms holds three values, bin 51 ms two: the mode is the centre of bin 50, 50.5 ms.
        let values = [
            40_000_000, 50_100_000, 50_200_000, 50_300_000, 51_500_000, 51_600_000, 60_000_000,
        ];
        assert_eq!(modal_latency_ns(&values), Some(50_500_000));
        // Median exactly 1000 ms: bins are 10 ms wide; [1020, 1030) ms holds three values.
        let values = [900, 991, 992, 1_000, 1_021, 1_022, 1_023].map(|ms| ms * MS);
        assert_eq!(modal_latency_ns(&values), Some(1_025 * MS));
        // A tie between bins picks the lower one.
        assert_eq!(modal_latency_ns(&[5 * MS, 50 * MS]), Some(5 * MS + MS / 2));
        assert_eq!(modal_latency_ns(&[]), None);
    }

    #[test]
    fn distance_cases() {
        let baseline = [100 * MS, 200 * MS, 300 * MS]; // sd = 100 ms
        let fault = [700 * MS, 700 * MS, 2_000 * MS];
        match modal_distance(&baseline, &fault, 1_000 * MS) {
            Distance::StandardDeviations {
                mode_ns,
                sd_ns,
                distance,
            } => {
                assert_eq!(
                    mode_ns,
                    700 * MS + 3_500_000,
                    "median 700 ms -> 7 ms bins; 700 ms sits in [700, 707)"
                );
                assert!((sd_ns - 100.0 * MS as f64).abs() < 1e-3);
                assert!((distance - (1_000.0 - 703.5) / 100.0).abs() < 1e-9);
            }
            other => panic!("{other:?}"),
        }
        // Zero SD: signed infinity.
        let flat = [400 * MS, 400 * MS];
        assert!(
            matches!(modal_distance(&flat, &fault, 1_000 * MS), Distance::StandardDeviations { distance, .. } if distance == f64::INFINITY)
        );
        assert!(
            matches!(modal_distance(&flat, &[3_000 * MS], 1_000 * MS), Distance::StandardDeviations { distance, .. } if distance == f64::NEG_INFINITY)
        );
        assert_eq!(
            modal_distance(&[MS], &fault, MS),
            Distance::InsufficientCompletedSamples
        );
        assert_eq!(
            modal_distance(&baseline, &[], MS),
            Distance::InsufficientCompletedSamples
        );
    }
}
