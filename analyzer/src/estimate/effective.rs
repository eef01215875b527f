//! The effective sample size of a tail quantile when latencies are correlated (SPEC §7, A4).
//!
//! Under continuous batching, requests that share a batch share its step times, so a window's
//! latencies are not independent, and §7's order-statistic interval, sized for n independent
//! samples, is too narrow. A quantile estimate moves with the share of samples above it (its
//! Bahadur representation: the sample p-quantile's error is the exceedance share's error
//! divided by the density there), so what a p-quantile's interval needs is the long-run
//! variance of the *exceedance series* `1{x_i > x_(ceil(np))}`, the requests in intended-time
//! order; the values' own correlation belongs to their mean, and overstates a tail's (a
//! Gaussian series correlated at 0.8 has exceedances of its 95th percentile correlated far
//! less). The method is that of Doss, Flegal, Jones and Neath (2014, "Markov chain Monte Carlo
//! estimation of quantiles", Electronic Journal of Statistics 8).
//!
//! The long-run variance is Geyer's initial positive sequence estimator (Geyer 1992,
//! "Practical Markov chain Monte Carlo", Statistical Science 7, §3.3): with the autocovariances
//! `gamma_k = (1/n) sum_{i < n-k} (x_i - mean)(x_{i+k} - mean)`, the sums of adjacent pairs
//! `Gamma_m = gamma_2m + gamma_2m+1` are added while they stay positive, and the variance is
//! `-gamma_0 + 2 sum Gamma_m`. It is R's `mcmc::initseq(x)$var.pos`, and the tests hold it to
//! that. The effective n is `n gamma_0 / variance`, never more than n: a series that looks
//! anti-correlated does not narrow an interval below §7's.
//!
//! ```
//! use percentes_analyzer::estimate::effective::{exceedances, ranks};
//! // Exceedances that come in runs of four: about a quarter as much information as n.
//! let above: Vec<usize> = (0..50).flat_map(|b| (0..4).map(move |i| b * 40 + i)).collect();
//! let e = exceedances(2000, &above, 2048);
//! let n_eff = e.n_eff.unwrap();
//! assert!(n_eff < 700.0 && n_eff > 300.0, "{n_eff}");
//! // The same n with n_eff = n reads §7's own ranks.
//! assert_eq!(ranks(1000, 1000.0, 0.99), Some((983, 997)));
//! assert!(ranks(1000, 300.0, 0.99).is_none());
//! ```

use super::tails::{self, Z_95};

/// The long-run variance of a series, by Geyer's initial positive sequence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LongRun {
    /// The series' length.
    pub n: usize,
    /// Its variance, `gamma_0` (divided by n).
    pub gamma0: f64,
    /// The asymptotic variance of its mean times n: `-gamma_0 + 2 sum Gamma_m`.
    pub variance: f64,
    /// How many pairs `Gamma_m` stayed positive and were added.
    pub pairs: usize,
}

impl LongRun {
    /// `n gamma_0 / variance`, at most n; n where the series is constant or the variance is
    /// not positive (nothing shows a correlation to correct for).
    pub fn n_eff(&self) -> f64 {
        let n = self.n as f64;
        if self.gamma0 <= 0.0 || self.variance <= 0.0 {
            return n;
        }
        (n * self.gamma0 / self.variance).min(n)
    }
}

/// Geyer's initial positive sequence over the autocovariances `gamma(k)` of a series of `n`,
/// read to lag `lag_max` at most; `None` where the sequence was still positive there.
fn initial_positive(
    n: usize,
    lag_max: usize,
    mut gamma: impl FnMut(usize) -> f64,
) -> Option<LongRun> {
    let gamma0 = gamma(0);
    let (mut sum, mut pairs) = (0.0, 0);
    while 2 * pairs + 1 < n {
        if 2 * pairs + 1 > lag_max {
            return None;
        }
        let even = if pairs == 0 { gamma0 } else { gamma(2 * pairs) };
        let big = even + gamma(2 * pairs + 1);
        if big <= 0.0 {
            break;
        }
        sum += big;
        pairs += 1;
    }
    Some(LongRun {
        n,
        gamma0,
        variance: -gamma0 + 2.0 * sum,
        pairs,
    })
}

/// The long-run variance of any series (each autocovariance a pass over it).
pub fn long_run(x: &[f64]) -> LongRun {
    let n = x.len();
    if n == 0 {
        return LongRun {
            n,
            gamma0: 0.0,
            variance: 0.0,
            pairs: 0,
        };
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let centred: Vec<f64> = x.iter().map(|v| v - mean).collect();
    initial_positive(n, n, |k| {
        centred[..n - k]
            .iter()
            .zip(&centred[k..])
            .map(|(a, b)| a * b)
            .sum::<f64>()
            / n as f64
    })
    .expect("every lag of the series is read")
}

/// A quantile's exceedance series read for its effective n, with the check that its two
/// halves agree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exceedances {
    /// The series' length (the window's completed requests).
    pub n: u64,
    /// The effective sample size, at most n; `None` where the correlation was still positive at
    /// the longest lag read (`statistics.tail_lag_max`): it reaches further than the estimate
    /// can follow, and no interval is given.
    pub n_eff: Option<f64>,
    /// Autocovariance pairs the estimate added (how far the correlation reached).
    pub pairs: usize,
    /// The share above the quantile in the first half (intended-time order) and the second.
    pub halves: (f64, f64),
    /// The halves' difference over its standard error at the effective n; `None` where the
    /// series is constant or the effective n is unknown.
    pub halves_z: Option<f64>,
}

impl Exceedances {
    /// Whether the halves differ at the two-sided 95 % level: the window's distribution moved
    /// inside it, and its quantile describes a mixture.
    pub fn halves_differ(&self) -> bool {
        self.halves_z.is_some_and(|z| z.abs() > Z_95)
    }
}

/// The count of exceedances `k` apart for every `k` up to `limit` (`[0]` holds them all).
fn pair_counts(above: &[usize], limit: usize) -> Vec<u64> {
    let mut counts = vec![0u64; limit + 1];
    counts[0] = above.len() as u64;
    for (a, &i) in above.iter().enumerate() {
        for &j in &above[a + 1..] {
            let Some(slot) = counts.get_mut(j - i) else {
                break;
            };
            *slot += 1;
        }
    }
    counts
}

/// The exceedance series of `n` samples in intended-time order, given the positions (sorted
/// ascending) of the samples above the quantile, read to lag `lag_max` at most. Exact for a 0/1
/// series: `sum (x_i - p)(x_{i+k} - p)` over the pairs of a lag is the count of exceedances k
/// apart, less p times the exceedances in each of the two overlapping stretches, plus (n - k)
/// p squared; the counts come from the exceedances' own differences, so a tail costs in its
/// exceedances, not in n, and the lags read grow fourfold from 64 until the sequence ends. An
/// exceedance series and its complement share their autocovariances, so the caller may pass
/// either (the shorter).
pub fn exceedances(n: usize, above: &[usize], lag_max: usize) -> Exceedances {
    debug_assert!(above.windows(2).all(|w| w[0] < w[1]) && above.last().is_none_or(|&l| l < n));
    let m = above.len() as f64;
    let p = if n == 0 { 0.0 } else { m / n as f64 };
    let mut limit = lag_max.min(64);
    let long = loop {
        let counts = pair_counts(above, limit);
        let read = initial_positive(n, limit, |k| {
            // Exceedances among the first n - k, and among the last n - k.
            let head = above.partition_point(|&i| i < n - k) as f64;
            let tail = m - above.partition_point(|&i| i < k) as f64;
            (counts[k] as f64 - p * (head + tail) + (n - k) as f64 * p * p) / n as f64
        });
        match read {
            Some(long) => break Some(long),
            None if limit >= lag_max => break None,
            None => limit = (limit * 4).min(lag_max),
        }
    };
    let half = n / 2;
    let first = above.partition_point(|&i| i < half) as f64;
    let (n1, n2) = (half as f64, (n - half) as f64);
    let halves = (
        if n1 > 0.0 { first / n1 } else { 0.0 },
        if n2 > 0.0 { (m - first) / n2 } else { 0.0 },
    );
    let n_eff = long.map(|l| l.n_eff());
    // The share's variance at the effective n, per sample: gamma_0 n / n_eff.
    let se = long.zip(n_eff).and_then(|(l, n_eff)| {
        let per_sample = l.gamma0 * n as f64 / n_eff;
        let se = (per_sample * (1.0 / n1 + 1.0 / n2)).sqrt();
        (n1 > 0.0 && n2 > 0.0 && se > 0.0).then_some(se)
    });
    Exceedances {
        n: n as u64,
        n_eff,
        pairs: long.map_or(lag_max / 2, |l| l.pairs),
        halves,
        halves_z: se.map(|se| (halves.0 - halves.1) / se),
    }
}

/// §7's ranks for the p-quantile of `n` sorted samples worth `n_eff` independent ones: the
/// interval on the exceedance share widened by `sqrt(n / n_eff)`, as ranks,
/// `n p -/+ 1.96 n sqrt(p (1 - p) / n_eff)` rounded outward; `None` where the effective n is
/// below §7's sample budget for p or a rank falls outside `1..=n`. At `n_eff = n` they are §7's.
pub fn ranks(n: u64, n_eff: f64, p: f64) -> Option<(u64, u64)> {
    if n_eff >= n as f64 {
        return tails::ranks(n, p);
    }
    if n_eff < tails::smallest_n(p) as f64 {
        return None;
    }
    let np = n as f64 * p;
    let half = Z_95 * n as f64 * (p * (1.0 - p) / n_eff).sqrt();
    let lower = (np - half).floor();
    let upper = (np + half).ceil();
    (lower >= 1.0 && upper <= n as f64).then_some((lower as u64, upper as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (splitmix64), so R can be handed the same series.
    struct Mix(u64);
    impl Mix {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn uniform(&mut self) -> f64 {
            ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        /// A standard normal (Box-Muller, one of the pair).
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    /// A Gaussian AR(1) of coefficient `phi` started in its stationary law.
    fn ar1(rng: &mut Mix, n: usize, phi: f64) -> Vec<f64> {
        let mut x = rng.normal() / (1.0 - phi * phi).sqrt();
        (0..n)
            .map(|_| {
                let v = x;
                x = phi * x + rng.normal();
                v
            })
            .collect()
    }

    /// Hand-computed: `[1, 0, 1, 0]` has mean 0.5, gamma = (0.25, -0.1875, 0.125, -0.0625);
    /// Gamma_0 = 0.0625 > 0, Gamma_1 = 0.0625 > 0 (no third pair in four), so the variance is
    /// -0.25 + 2 x 0.125 = 0, read as no correction (n_eff = n).
    #[test]
    fn the_initial_positive_sequence_by_hand() {
        let long = long_run(&[1.0, 0.0, 1.0, 0.0]);
        assert_eq!(long.gamma0, 0.25);
        assert_eq!(long.pairs, 2);
        assert!(long.variance.abs() < 1e-15, "{}", long.variance);
        assert_eq!(long.n_eff(), 4.0);
        // [1, 1, 0, 0]: gamma = (0.25, 0.0625, -0.125, -0.0625); Gamma_0 = 0.3125, Gamma_1 < 0:
        // variance -0.25 + 0.625 = 0.375, n_eff = 4 x 0.25 / 0.375 = 2.667.
        let long = long_run(&[1.0, 1.0, 0.0, 0.0]);
        assert_eq!(long.pairs, 1);
        assert!((long.variance - 0.375).abs() < 1e-15);
        assert!((long.n_eff() - 8.0 / 3.0).abs() < 1e-12);
        assert_eq!(long_run(&[3.0; 10]).n_eff(), 10.0);
        assert_eq!(long_run(&[]).n_eff(), 0.0);
    }

    /// The exceedance path is the general one, exactly, on 0/1 series (and on the complement).
    #[test]
    fn exceedances_agree_with_the_general_series() {
        let mut rng = Mix(7);
        for (n, phi) in [(50usize, 0.0), (400, 0.6), (997, 0.9), (2, 0.5), (1, 0.0)] {
            let x = ar1(&mut rng, n, phi);
            let mut sorted = x.clone();
            sorted.sort_by(f64::total_cmp);
            let q = sorted[((n as f64 * 0.9).ceil() as usize).clamp(1, n) - 1];
            let above: Vec<usize> = (0..n).filter(|&i| x[i] > q).collect();
            let below: Vec<usize> = (0..n).filter(|&i| x[i] <= q).collect();
            let series: Vec<f64> = x.iter().map(|&v| f64::from(u8::from(v > q))).collect();
            let general = long_run(&series);
            for e in [exceedances(n, &above, n), exceedances(n, &below, n)] {
                let n_eff = e.n_eff.unwrap();
                assert!(
                    (n_eff - general.n_eff()).abs() <= 1e-9 * general.n_eff().max(1.0),
                    "n {n} phi {phi}: {n_eff} against {}",
                    general.n_eff()
                );
                assert_eq!(e.pairs, general.pairs);
            }
        }
    }

    /// The series of this test, as R read them. Produced by writing each series below to a file
    /// (one value a line) and running, with Debian bookworm's r-cran-mcmc 0.9-7:
    /// `Rscript -e 'library(mcmc); for (f in c(...)) { x <- scan(f); r <- initseq(x);
    /// cat(sprintf("%.15g %.15g\n", r$gamma0, r$var.pos)) }'`.
    /// The series: AR(1) from `Mix(11)` (n 300, phi 0.5), `Mix(12)` (n 1001, phi 0.9),
    /// `Mix(13)` (n 64, phi -0.4), and the exceedances above the 95th percentile of `Mix(14)`'s
    /// (n 2000, phi 0.8).
    #[test]
    fn long_run_variance_matches_r_mcmc_initseq() {
        let fixtures: [(Vec<f64>, f64, f64); 4] = [
            (ar1(&mut Mix(11), 300, 0.5), R_GAMMA0[0], R_VAR_POS[0]),
            (ar1(&mut Mix(12), 1001, 0.9), R_GAMMA0[1], R_VAR_POS[1]),
            (ar1(&mut Mix(13), 64, -0.4), R_GAMMA0[2], R_VAR_POS[2]),
            (exceedance_series(), R_GAMMA0[3], R_VAR_POS[3]),
        ];
        for (i, (x, gamma0, var_pos)) in fixtures.iter().enumerate() {
            let long = long_run(x);
            assert!(
                (long.gamma0 - gamma0).abs() <= 1e-12 * gamma0.abs(),
                "fixture {i}: gamma0 {} against R's {gamma0}",
                long.gamma0
            );
            assert!(
                (long.variance - var_pos).abs() <= 1e-10 * var_pos.abs(),
                "fixture {i}: var.pos {} against R's {var_pos}",
                long.variance
            );
            assert_eq!(long.pairs + 1, R_PAIRS[i], "fixture {i}: pairs");
        }
    }

    fn exceedance_series() -> Vec<f64> {
        let x = ar1(&mut Mix(14), 2000, 0.8);
        let mut sorted = x.clone();
        sorted.sort_by(f64::total_cmp);
        let q = sorted[1900 - 1];
        x.iter().map(|&v| f64::from(u8::from(v > q))).collect()
    }

    const R_GAMMA0: [f64; 4] = [
        1.177_940_091_495_228_3,
        6.049_866_525_142_308,
        1.375_847_812_642_183,
        0.047_499_999_999_998_9,
    ];
    const R_VAR_POS: [f64; 4] = [
        2.928_303_292_577_363_3,
        107.256_763_076_918_56,
        0.172_300_945_263_550_22,
        0.228_387_499_999_998_38,
    ];
    /// `length(initseq(x)$Gamma.pos)`: the positive pairs and the first that was not (R keeps it,
    /// at zero).
    const R_PAIRS: [usize; 4] = [6, 12, 4, 6];

    /// Writes the fixtures' series for R (run by hand: `cargo test -p percentes-analyzer
    /// write_series_for_r -- --ignored`).
    #[test]
    #[ignore = "writes the series R reads for the fixtures above"]
    fn write_series_for_r() {
        let series = [
            ar1(&mut Mix(11), 300, 0.5),
            ar1(&mut Mix(12), 1001, 0.9),
            ar1(&mut Mix(13), 64, -0.4),
            exceedance_series(),
        ];
        for (i, x) in series.iter().enumerate() {
            let text: String = x.iter().map(|v| format!("{v:.17e}\n")).collect();
            std::fs::write(format!("/tmp/percentes-initseq-{i}.txt"), text).unwrap();
        }
    }

    /// A long AR(1)'s values: the known effective n of the mean is n (1 - phi) / (1 + phi).
    #[test]
    fn a_long_ar1_reads_its_known_effective_n() {
        let (n, phi) = (200_000, 0.6);
        let x = ar1(&mut Mix(3), n, phi);
        let known = n as f64 * (1.0 - phi) / (1.0 + phi);
        let got = long_run(&x).n_eff();
        assert!(
            (got / known - 1.0).abs() < 0.08,
            "n_eff {got} against the known {known}"
        );
    }

    #[test]
    fn effective_ranks_widen_and_refuse_at_the_budget() {
        assert_eq!(ranks(1000, 1000.0, 0.99), tails::ranks(1000, 0.99));
        assert_eq!(ranks(1000, 5000.0, 0.99), tails::ranks(1000, 0.99));
        // n 1000, n_eff 500, p95: 950 -/+ 1.96 x 1000 x sqrt(0.0475 / 500) = 950 -/+ 19.10.
        assert_eq!(ranks(1000, 500.0, 0.95), Some((930, 970)));
        assert_eq!(tails::ranks(1000, 0.95), Some((936, 964)));
        // Below the budget (73 for p95, 381 for p99), refused whatever n.
        assert_eq!(ranks(100_000, 72.9, 0.95), None);
        assert!(ranks(100_000, 73.0, 0.95).is_some());
        assert_eq!(ranks(100_000, 380.0, 0.99), None);
        assert!(ranks(100_000, 381.0, 0.99).is_some());
    }

    /// Halves that differ are flagged; a stationary series' are not.
    #[test]
    fn the_halves_check() {
        // 1,000 samples, 50 exceedances all in the second half: the window moved.
        let moved: Vec<usize> = (0..50).map(|i| 500 + i * 10).collect();
        let e = exceedances(1000, &moved, 2048);
        assert_eq!(e.halves, (0.0, 0.1));
        assert!(e.halves_differ(), "{e:?}");
        // Evenly spread: no difference.
        let spread: Vec<usize> = (0..50).map(|i| i * 20 + 3).collect();
        let e = exceedances(1000, &spread, 2048);
        assert_eq!(e.halves, (0.05, 0.05));
        assert!(!e.halves_differ());
        assert_eq!(exceedances(10, &[], 2048).halves_z, None);
        assert_eq!(exceedances(10, &[], 2048).n_eff, Some(10.0));
    }

    /// A correlation that outlasts the lags read gives no effective n: the exceedances of a
    /// window whose last tenth is all above the quantile (a step) stay correlated past 256.
    #[test]
    fn a_correlation_past_the_longest_lag_gives_no_effective_n() {
        let step: Vec<usize> = (18_000..20_000).collect();
        let capped = exceedances(20_000, &step, 256);
        assert_eq!(capped.n_eff, None);
        assert_eq!(capped.halves_z, None);
        assert!(!capped.halves_differ());
        // Read far enough, the sequence ends, and the effective n is tiny.
        let full = exceedances(20_000, &step, 20_000).n_eff.unwrap();
        assert!(full < 20.0, "{full}");
        // Where the sequence ends early, the growing reads agree with one read of every lag.
        let spread: Vec<usize> = (0..400).map(|i| i * 50 + (i % 7)).collect();
        assert_eq!(
            exceedances(20_000, &spread, 2048),
            exceedances(20_000, &spread, 20_000)
        );
    }

    /// Must show (issue 53): on a correlated series of known structure (Gaussian AR(1), phi 0.8,
    /// whose exceedances of the 95th percentile are correlated), §7's interval computed as if the
    /// n samples were independent covers the true quantile well under 95 %, and the interval at
    /// the effective n covers it at 95 % within Monte Carlo error (as run: 69.1 % and 94.8 %).
    #[test]
    fn intervals_under_correlation_cover_at_their_nominal_rate() {
        let (n, phi, p, reps) = (2000usize, 0.8, 0.95, 1000);
        // The true 95th percentile of the stationary law N(0, 1 / (1 - phi^2)).
        let truth = 1.644_853_626_951_472_2 / (1.0f64 - phi * phi).sqrt();
        let mut rng = Mix(2024);
        let (mut independent, mut effective) = (0u32, 0u32);
        for _ in 0..reps {
            let x = ar1(&mut rng, n, phi);
            let mut sorted = x.clone();
            sorted.sort_by(f64::total_cmp);
            let point = sorted[(n as f64 * p).ceil() as usize - 1];
            let above: Vec<usize> = (0..n).filter(|&i| x[i] > point).collect();
            let e = exceedances(n, &above, 2048);
            let covers = |(l, u): (u64, u64)| {
                sorted[l as usize - 1] <= truth && truth <= sorted[u as usize - 1]
            };
            independent += u32::from(covers(tails::ranks(n as u64, p).unwrap()));
            effective += u32::from(
                e.n_eff
                    .and_then(|n_eff| ranks(n as u64, n_eff, p))
                    .is_some_and(covers),
            );
        }
        let (independent, effective) = (
            f64::from(independent) / reps as f64,
            f64::from(effective) / reps as f64,
        );
        // Monte Carlo error at 95 % over 1,000 repetitions: 0.0069; three of them either side.
        assert!(independent < 0.85, "independent coverage {independent}");
        assert!(
            (effective - 0.95).abs() <= 3.0 * (0.95f64 * 0.05 / reps as f64).sqrt(),
            "effective coverage {effective} (independent {independent})"
        );
    }
}
