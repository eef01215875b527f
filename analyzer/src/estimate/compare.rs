//! Two-sample comparisons for `percentes compare` (issue 37 item 5): a distribution-free test
//! and interval for a latency quantile, and an exact test and a score interval for a share.
//!
//! - **A quantile** of two completed samples: Mood's quantile test. The two samples are pooled,
//!   the pooled q-quantile m taken (nearest rank), and each sample's count at or below m set in
//!   a 2 x 2 table, tested by Fisher's exact test. It assumes nothing about either
//!   distribution. The difference B - A gets a simultaneous interval from the two §7
//!   order-statistic intervals, each at 97.5 % (z = 2.2414, Bonferroni, so both hold together
//!   with probability at least 95 %): `[lo_B - hi_A, hi_B - lo_A]`.
//! - **A share** (error rate, censored rate, goodput): Fisher's exact test on (count, n - count)
//!   of each run; the difference B - A gets Newcombe's hybrid score interval (his method 10,
//!   from the two Wilson intervals at z = 1.96).
//!
//! - **A run-level figure** of two groups of runs (two or more a side): Welch's t-test, and the
//!   difference of means with Welch's 95 % interval (t at the Welch-Satterthwaite degrees of
//!   freedom), as R's `t.test` computes them.
//!
//! - **Under v0.5 (A4)** each side's samples are worth their effective number (SPEC §7, the
//!   exceedance series in intended-time order, [`super::effective`]): a side's order-statistic
//!   interval is sized at its effective n, and a count it tests (Mood's table, a share) is read
//!   by Rao and Scott's correction for clustered binary data (1992, Biometrics 48): the count
//!   and its n each divided by the side's design effect n / n_eff, then rounded to whole
//!   requests, before Fisher's test and Newcombe's interval. With n_eff = n every figure is the
//!   one above.
//!
//! Fisher's test is two-sided as R's `fisher.test` computes it: the sum of the probabilities of
//! every table with the observed margins no more probable than the observed one (with R's
//! relative tolerance of 1e-7).

use super::runs::{ln_gamma, regularized_beta, welch};
use super::tails::Z_95;

/// The normal quantile for a two-sided 97.5 % interval, each of the two a simultaneous 95 %
/// difference interval rests on (R: `qnorm(0.9875)`).
pub const Z_97_5: f64 = 2.241_402_727_604_946_4;

fn ln_choose(n: u64, k: u64) -> f64 {
    ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0)
}

/// Fisher's exact test, two-sided, of the table `[[a, b], [c, d]]` (rows the two samples).
pub fn fisher_exact(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let (row1, col1, total) = (a + b, a + c, a + b + c + d);
    if row1 == 0 || row1 == total || col1 == 0 || col1 == total {
        return 1.0; // a margin at zero: one table is possible
    }
    let ln_denominator = ln_choose(total, row1);
    let ln_p = |x: u64| ln_choose(col1, x) + ln_choose(total - col1, row1 - x) - ln_denominator;
    let low = (row1 + col1).saturating_sub(total);
    let high = row1.min(col1);
    let observed = ln_p(a);
    // R's relative tolerance: a table within 1e-7 of the observed probability counts as it.
    let bound = observed + (1.0f64 + 1e-7).ln();
    let mut p = 0.0;
    for x in low..=high {
        let lp = ln_p(x);
        if lp <= bound {
            p += lp.exp();
        }
    }
    p.min(1.0)
}

/// The nearest-rank q-quantile of a sorted sample (the sample of rank ceil(q n)).
pub fn nearest_rank(sorted: &[u64], q: f64) -> Option<u64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

/// The order-statistic interval of the q-quantile at normal quantile `z`, ranks rounded outward
/// (as §7's, at another level); `None` where a rank falls outside the sample.
pub fn order_interval(sorted: &[u64], q: f64, z: f64) -> Option<(u64, u64)> {
    order_interval_at(sorted, q, z, sorted.len() as f64)
}

/// [`order_interval`] of a sample worth `n_eff` independent ones (A4): the half-width in ranks
/// `z n sqrt(q (1 - q) / n_eff)`; at `n_eff >= n`, `order_interval` itself.
pub fn order_interval_at(sorted: &[u64], q: f64, z: f64, n_eff: f64) -> Option<(u64, u64)> {
    let n = sorted.len() as f64;
    let np = n * q;
    let half = if n_eff >= n {
        z * (np * (1.0 - q)).sqrt()
    } else {
        z * n * (q * (1.0 - q) / n_eff).sqrt()
    };
    let (lower, upper) = ((np - half).floor(), (np + half).ceil());
    (lower >= 1.0 && upper <= n).then(|| (sorted[lower as usize - 1], sorted[upper as usize - 1]))
}

/// Mood's quantile test of two sorted samples at q.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileTest {
    /// The pooled sample's q-quantile.
    pub pooled: u64,
    /// Sample A's count at or below it, and its size.
    pub a_at_or_below: (u64, u64),
    /// Sample B's count at or below it, and its size.
    pub b_at_or_below: (u64, u64),
    /// Fisher's two-sided p-value on that table.
    pub p: f64,
}

/// Mood's quantile test; `None` when a sample is empty.
pub fn quantile_test(a: &[u64], b: &[u64], q: f64) -> Option<QuantileTest> {
    let m = pooled_quantile(a, b, q)?;
    quantile_test_at(a, b, m, (a.len() as f64, b.len() as f64))
}

/// The pooled sample's nearest-rank q-quantile, Mood's split; `None` when a sample is empty.
pub fn pooled_quantile(a: &[u64], b: &[u64], q: f64) -> Option<u64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut pooled: Vec<u64> = a.iter().chain(b).copied().collect();
    pooled.sort_unstable();
    nearest_rank(&pooled, q)
}

/// Mood's test at the split `m` of two samples worth `n_eff` independent ones each (A4): each
/// side's table row by [`effective_count`]. At `n_eff = n`, [`quantile_test`].
pub fn quantile_test_at(
    a: &[u64],
    b: &[u64],
    m: u64,
    (eff_a, eff_b): (f64, f64),
) -> Option<QuantileTest> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let below = |s: &[u64]| s.partition_point(|&v| v <= m) as u64;
    let (ka, na) = effective_count(below(a), a.len() as u64, eff_a);
    let (kb, nb) = effective_count(below(b), b.len() as u64, eff_b);
    Some(QuantileTest {
        pooled: m,
        a_at_or_below: (ka, na),
        b_at_or_below: (kb, nb),
        p: fisher_exact(ka, na - ka, kb, nb - kb),
    })
}

/// Rao and Scott's correction: `k` of `n` samples worth `n_eff` independent ones reads as
/// `k n_eff / n` of `n_eff`: n_eff rounded to a whole request (at least one), and the count to
/// the same share of it; unchanged where `n_eff >= n`.
pub fn effective_count(k: u64, n: u64, n_eff: f64) -> (u64, u64) {
    if n == 0 || n_eff >= n as f64 {
        return (k, n);
    }
    // The share kept, on the rounded n: 30 of 30 worth 0.2 is 1 of 1, not 0 of 1.
    let ne = (n_eff.round() as u64).max(1);
    let ke = ((k as f64 / n as f64 * ne as f64).round() as u64).min(ne);
    (ke, ne)
}

/// The simultaneous 95 % interval of the difference of q-quantiles, B - A (signed, in the
/// samples' unit); `None` where either sample is too small for its 97.5 % interval.
pub fn quantile_difference(a: &[u64], b: &[u64], q: f64) -> Option<(f64, f64)> {
    quantile_difference_at(a, b, q, (a.len() as f64, b.len() as f64))
}

/// [`quantile_difference`] of two samples worth `n_eff` independent ones each (A4).
pub fn quantile_difference_at(
    a: &[u64],
    b: &[u64],
    q: f64,
    (eff_a, eff_b): (f64, f64),
) -> Option<(f64, f64)> {
    let (lo_a, hi_a) = order_interval_at(a, q, Z_97_5, eff_a)?;
    let (lo_b, hi_b) = order_interval_at(b, q, Z_97_5, eff_b)?;
    Some((lo_b as f64 - hi_a as f64, hi_b as f64 - lo_a as f64))
}

/// Wilson's score interval for `x` of `n` at `z`.
pub fn wilson(x: u64, n: u64, z: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let (x, n) = (x as f64, n as f64);
    let p = x / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// Newcombe's hybrid score interval (method 10) for p_B - p_A, 95 %.
pub fn share_difference(xa: u64, na: u64, xb: u64, nb: u64) -> Option<(f64, f64)> {
    let (la, ua) = wilson(xa, na, Z_95)?;
    let (lb, ub) = wilson(xb, nb, Z_95)?;
    let (pa, pb) = (xa as f64 / na as f64, xb as f64 / nb as f64);
    let d = pb - pa;
    Some((
        d - ((pb - lb).powi(2) + (ua - pa).powi(2)).sqrt(),
        d + ((ub - pb).powi(2) + (pa - la).powi(2)).sqrt(),
    ))
}

/// Two groups' difference of means, B - A, by Welch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WelchDifference {
    /// mean(B) - mean(A).
    pub difference: f64,
    /// Welch's 95 % interval of it.
    pub interval: (f64, f64),
    /// The two-sided p-value.
    pub p: f64,
    /// The Welch-Satterthwaite degrees of freedom.
    pub df: f64,
}

/// The two-sided 95 % quantile of Student's t at `df`, by bisection on the p-value
/// `I_{df/(df+t^2)}(df/2, 1/2)` (monotone in t) to 1e-12.
fn t_975(df: f64) -> f64 {
    let p = |t: f64| regularized_beta(df / (df + t * t), df / 2.0, 0.5);
    let (mut lo, mut hi) = (0.0f64, 1e3f64);
    while hi - lo > 1e-12 {
        let mid = 0.5 * (lo + hi);
        if p(mid) > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Welch's comparison of `b` against `a`; `None` with fewer than two values a side or no
/// variance at all.
pub fn welch_difference(a: &[f64], b: &[f64]) -> Option<WelchDifference> {
    let (_, df, p) = welch(b, a)?;
    let moments = |x: &[f64]| {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var / n)
    };
    let ((ma, sa), (mb, sb)) = (moments(a), moments(b));
    let difference = mb - ma;
    let half = t_975(df) * (sa + sb).sqrt();
    Some(WelchDifference {
        difference,
        interval: (difference - half, difference + half),
        p,
        df,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Produced by R 4.2.2 (Debian's r-base-core) with
    /// `for (t in tables) cat(sprintf("%.17g", fisher.test(matrix(t, 2, byrow = TRUE))$p.value))`
    /// over these tables: a symmetric one, a strong effect, zero cells, large counts, a
    /// degenerate margin, rare events and a perfectly balanced table.
    const R_FISHER: [(u64, u64, u64, u64, f64); 7] = [
        (3, 1, 1, 3, 0.485_714_285_714_285_8),
        (10, 2, 3, 15, 0.000_536_724_119_143_435_9),
        (0, 5, 5, 0, 0.007_936_507_936_507_94),
        (100, 400, 130, 370, 0.029_185_908_035_560_402),
        (7, 0, 0, 0, 1.0),
        (1, 999, 12, 988, 0.003_323_491_788_793_14),
        (250, 250, 250, 250, 1.0),
    ];

    #[test]
    fn fisher_agrees_with_r() {
        for (a, b, c, d, r) in R_FISHER {
            let p = fisher_exact(a, b, c, d);
            assert!(
                (p - r).abs() <= 1e-10 * r.max(1e-300),
                "{a} {b} {c} {d}: {p} vs R {r}"
            );
        }
    }

    /// By hand: [[3, 1], [1, 3]] has margins 4, 4 of 8; P(x) = C(4,x) C(4,4-x) / C(8,4) =
    /// 1, 16, 36, 16, 1 over 70; the observed x = 3 (16/70) and every table no more probable
    /// (x = 0, 1, 3, 4) sum to 34/70.
    /// By hand: 40 of 100 worth 25 reads as 10 of 25 (design effect 4); rounding takes
    /// 7 of 30 worth 12.4 to 3 (7/30 x 12 = 2.8) of 12; worth n or more, unchanged.
    #[test]
    fn rao_and_scotts_counts_by_hand() {
        assert_eq!(effective_count(40, 100, 25.0), (10, 25));
        assert_eq!(effective_count(7, 30, 12.4), (3, 12));
        assert_eq!(effective_count(7, 30, 30.0), (7, 30));
        assert_eq!(effective_count(7, 30, 90.0), (7, 30));
        assert_eq!(effective_count(0, 0, 0.0), (0, 0));
        assert_eq!(effective_count(30, 30, 0.2), (1, 1));
    }

    /// Mood's test on samples worth a quarter of their count: the table [[8, 2], [3, 7]] of the
    /// by-hand test below becomes [[2, 1], [1, 2]] (each n 2.5 -> 3; 8/10 x 3 = 2.4 -> 2,
    /// 3/10 x 3 = 0.9 -> 1), and the difference interval widens: at n = 1000 worth 250, the p50's
    /// 97.5 % ranks are 500 -/+ 2.2414 x 1000 x sqrt(0.25 / 250) = 500 -/+ 70.88 -> 429 and 571,
    /// where independent they are 500 -/+ 35.44 -> 464 and 536.
    #[test]
    fn moods_test_and_the_difference_at_an_effective_n() {
        let a: Vec<u64> = (1..=10).collect();
        let b: Vec<u64> = (6..=15).collect();
        let t = quantile_test_at(&a, &b, 8, (2.5, 2.5)).unwrap();
        assert_eq!((t.a_at_or_below, t.b_at_or_below), ((2, 3), (1, 3)));
        assert_eq!(t.p, fisher_exact(2, 1, 1, 2));
        assert_eq!(
            quantile_test_at(&a, &b, 8, (10.0, 10.0)),
            quantile_test(&a, &b, 0.5)
        );
        let x: Vec<u64> = (1..=1000).collect();
        assert_eq!(order_interval_at(&x, 0.5, Z_97_5, 250.0), Some((429, 571)));
        assert_eq!(order_interval(&x, 0.5, Z_97_5), Some((464, 536)));
        assert_eq!(
            quantile_difference_at(&x, &x, 0.5, (250.0, 1000.0)),
            Some((464.0 - 571.0, 536.0 - 429.0))
        );
    }

    #[test]
    fn fisher_by_hand() {
        assert!((fisher_exact(3, 1, 1, 3) - 34.0 / 70.0).abs() < 1e-14);
    }

    /// Two samples of 10: A = 1..=10, B = 6..=15. Pooled (20 values, 6..=10 twice) median by
    /// nearest rank is the 10th smallest: 1,2,3,4,5,6,6,7,7,8 -> 8. A has 8 at or below it, B
    /// has 3 (6, 7, 8): Fisher on [[8, 2], [3, 7]].
    #[test]
    fn moods_test_by_hand() {
        let a: Vec<u64> = (1..=10).collect();
        let b: Vec<u64> = (6..=15).collect();
        let t = quantile_test(&a, &b, 0.5).unwrap();
        assert_eq!(t.pooled, 8);
        assert_eq!((t.a_at_or_below, t.b_at_or_below), ((8, 10), (3, 10)));
        assert_eq!(t.p, fisher_exact(8, 2, 3, 7));
        // Identical samples: nothing to tell apart.
        assert_eq!(quantile_test(&a, &a, 0.5).unwrap().p, 1.0);
        assert!(quantile_test(&a, &[], 0.5).is_none());
    }

    /// n = 1000, q = 0.99 at z = 2.2414: np = 990, half = 2.2414 sqrt(9.9) = 7.052, ranks
    /// floor(982.95) = 982 and ceil(997.05) = 998; on the sample 1..=1000 those are the values.
    #[test]
    fn the_difference_interval_rests_on_two_order_statistic_intervals() {
        let a: Vec<u64> = (1..=1000).collect();
        assert_eq!(order_interval(&a, 0.99, Z_97_5), Some((982, 998)));
        let b: Vec<u64> = a.iter().map(|v| v + 100).collect();
        assert_eq!(quantile_difference(&a, &b, 0.99), Some((84.0, 116.0)));
        // Too few for a 97.5 % interval on p99: refused, not narrowed.
        assert_eq!(quantile_difference(&a[..400], &b, 0.99), None);
    }

    /// Newcombe (1998), Statistics in Medicine 17, Table II, example (a): 56/70 against 48/80.
    /// His method 10 gives 0.0524 to 0.3339 for p1 - p2; here A = 48/80 and B = 56/70, so
    /// B - A is the same interval.
    #[test]
    fn newcombes_interval_matches_his_worked_example() {
        let (lo, hi) = share_difference(48, 80, 56, 70).unwrap();
        assert!((lo - 0.0524).abs() < 5e-5, "{lo}");
        assert!((hi - 0.3339).abs() < 5e-5, "{hi}");
        // Wilson at 81/263 (Newcombe's single-proportion example): 0.2553 to 0.3662.
        let (l, u) = wilson(81, 263, Z_95).unwrap();
        assert!(
            (l - 0.2553).abs() < 5e-5 && (u - 0.3662).abs() < 5e-5,
            "{l} {u}"
        );
    }

    /// R 4.2.2: `t.test(b, a)` (Welch, the default), `conf.int`, `p.value` and `parameter`
    /// printed with `%.17g`.
    #[test]
    fn welchs_interval_agrees_with_r() {
        let a = [10.1, 11.3, 9.8, 10.6, 10.9];
        let b = [12.0, 12.9, 11.7, 13.4, 12.2];
        let w = welch_difference(&a, &b).unwrap();
        let r = (
            0.948_117_715_003_674_7,
            2.851_882_284_996_322_3,
            0.001_804_259_050_976_294_5,
            7.842_216_853_212_364,
        );
        assert!((w.interval.0 - r.0).abs() < 1e-9, "{w:?}");
        assert!((w.interval.1 - r.1).abs() < 1e-9, "{w:?}");
        assert!((w.p - r.2).abs() < 1e-12, "{w:?}");
        assert!((w.df - r.3).abs() < 1e-12, "{w:?}");
        let w = welch_difference(&[1.0, 2.0], &[1.5, 2.5, 3.5]).unwrap();
        assert!(
            (w.interval.0 + 1.487_733_798_205_382_4).abs() < 1e-9,
            "{w:?}"
        );
        assert!((w.interval.1 - 3.487_733_798_205_382).abs() < 1e-9, "{w:?}");
        assert!((w.p - 0.285_022_840_014_274_36).abs() < 1e-12, "{w:?}");
        assert!(welch_difference(&[1.0], &[2.0, 3.0]).is_none());
    }
}
