//! Tail intervals from order statistics (SPEC §7).
//!
//! For the p-quantile of n completed samples, the two-sided 95 % distribution-free interval is
//! `[x_(l), x_(u)]` with ranks `l = floor(np - 1.96 sqrt(np(1-p)))` and
//! `u = ceil(np + 1.96 sqrt(np(1-p)))` (1-based, rounded outward). It is reported only where
//! `1 <= l` and `u <= n`; otherwise the line reads exactly
//! `p99-CI omitted (sample budget insufficient, §7)`. The smallest n with an interval is 73 for
//! p95 and 381 for p99.
//!
//! ```
//! use percentes_analyzer::estimate::tails::ranks;
//! assert_eq!(ranks(1000, 0.99), Some((983, 997)));
//! assert_eq!(ranks(380, 0.99), None);
//! ```

/// The normal quantile for a two-sided 95 % interval.
pub const Z_95: f64 = 1.96;

/// The outward-rounded ranks, or `None` where either falls outside `1..=n`.
pub fn ranks(n: u64, p: f64) -> Option<(u64, u64)> {
    let np = n as f64 * p;
    let half = Z_95 * (np * (1.0 - p)).sqrt();
    let lower = (np - half).floor();
    let upper = (np + half).ceil();
    (lower >= 1.0 && upper <= n as f64).then_some((lower as u64, upper as u64))
}

/// The smallest sample with an interval for quantile `p` (73 for p95, 381 for p99): what a
/// refusal says the figure needs.
pub fn smallest_n(p: f64) -> u64 {
    (1..=1_000_000)
        .find(|&n| ranks(n, p).is_some())
        .unwrap_or(u64::MAX)
}

/// A tail reading: an interval, or the refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailInterval {
    /// Both ranks fall inside the sample.
    Interval {
        /// The lower rank (1-based).
        lower_rank: u64,
        /// The upper rank (1-based).
        upper_rank: u64,
        /// The order statistic at the lower rank.
        lower: u64,
        /// The order statistic at the upper rank.
        upper: u64,
    },
    /// The sample budget is insufficient (§7).
    Omitted,
}

/// The interval for quantile `p` from completed latencies sorted ascending.
pub fn interval(sorted: &[u64], p: f64) -> TailInterval {
    debug_assert!(
        sorted.windows(2).all(|w| w[0] <= w[1]),
        "interval needs sorted latencies"
    );
    match ranks(sorted.len() as u64, p) {
        Some((l, u)) => TailInterval::Interval {
            lower_rank: l,
            upper_rank: u,
            lower: sorted[l as usize - 1],
            upper: sorted[u as usize - 1],
        },
        None => TailInterval::Omitted,
    }
}

/// The refusal line, exactly as SPEC §7 words it.
pub fn omitted_line(quantile_name: &str) -> String {
    format!("{quantile_name}-CI omitted (sample budget insufficient, §7)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// P(B = k) for B ~ Binomial(n, p), summed in log space.
    fn binomial_pmf(n: u64, p: f64) -> Vec<f64> {
        let ln_p = p.ln();
        let ln_q = (1.0 - p).ln();
        let mut ln_choose = 0.0f64; // ln C(n, 0)
        (0..=n)
            .map(|k| {
                if k > 0 {
                    ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
                }
                (ln_choose + k as f64 * ln_p + (n - k) as f64 * ln_q).exp()
            })
            .collect()
    }

    /// Exact coverage of `[x_(l), x_(u)]` for the p-quantile: P(l <= B <= u - 1), B ~ Bin(n, p)
    /// counting samples below the true quantile.
    fn coverage(n: u64, p: f64, l: u64, u: u64) -> f64 {
        binomial_pmf(n, p)[l as usize..u as usize].iter().sum()
    }

    #[test]
    fn spec_examples_and_thresholds() {
        assert_eq!(ranks(1000, 0.99), Some((983, 997)));
        assert_eq!(ranks(72, 0.95), None);
        assert!(ranks(73, 0.95).is_some());
        assert_eq!(ranks(380, 0.99), None);
        assert!(ranks(381, 0.99).is_some());
        assert_eq!(ranks(3837, 0.999), None);
        assert!(ranks(3838, 0.999).is_some());
    }

    /// The normal-approximation ranks checked against the exact binomial: the interval's true
    /// coverage is close to 95 % wherever the spec grants one, and the exact binomial's own
    /// shortest central interval lies within a rank or two of ours.
    #[test]
    fn ranks_against_the_exact_binomial() {
        for &(p, n) in &[
            (0.95, 73u64),
            (0.95, 200),
            (0.95, 1000),
            (0.95, 10_000),
            (0.99, 381),
            (0.99, 1000),
            (0.99, 5000),
            (0.99, 20_000),
        ] {
            let (l, u) = ranks(n, p).unwrap();
            let cov = coverage(n, p, l, u);
            assert!(
                (0.93..=0.99).contains(&cov),
                "p {p} n {n}: ranks ({l}, {u}) cover {cov:.4}"
            );
            // Exact central ranks: the largest l with P(B < l) <= 2.5 % and the smallest u with
            // P(B >= u) <= 2.5 %.
            let pmf = binomial_pmf(n, p);
            let mut below = 0.0;
            let mut exact_l = 0;
            for (k, mass) in pmf.iter().enumerate() {
                if below + mass > 0.025 {
                    exact_l = k as u64;
                    break;
                }
                below += mass;
            }
            let mut above = 0.0;
            let mut exact_u = n;
            for k in (0..=n as usize).rev() {
                if above + pmf[k] > 0.025 {
                    exact_u = k as u64 + 1;
                    break;
                }
                above += pmf[k];
            }
            assert!(
                l.abs_diff(exact_l) <= 2 && u.abs_diff(exact_u) <= 2,
                "p {p} n {n}: ours ({l}, {u}), exact ({exact_l}, {exact_u})"
            );
        }
    }

    #[test]
    fn interval_reads_the_order_statistics() {
        let sorted: Vec<u64> = (1..=1000).collect();
        assert_eq!(
            interval(&sorted, 0.99),
            TailInterval::Interval {
                lower_rank: 983,
                upper_rank: 997,
                lower: 983,
                upper: 997
            }
        );
        assert_eq!(interval(&sorted[..100], 0.99), TailInterval::Omitted);
        assert_eq!(
            omitted_line("p99"),
            "p99-CI omitted (sample budget insufficient, §7)"
        );
    }
}
