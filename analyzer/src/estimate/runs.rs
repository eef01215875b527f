//! Run-level statistics over the N = 5 runs of a (variant, configuration) (SPEC §5, §7).
//!
//! All values are kept verbatim; the summary adds the median, the mean, a t-interval with the
//! pinned t = 2.776 (df = 4, so only for exactly five runs), the min-max range and the run-to-run
//! coefficient of variation (the noise floor). Bootstrap is forbidden at N = 5 and not offered.
//! Secondary comparisons get Holm's step-down correction.

use percentes_formats::pins;

/// A scalar measured once per run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// Every run's value, in run order, verbatim.
    pub values: Vec<f64>,
    /// Median.
    pub median: f64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (n - 1); `None` for one run.
    pub sd: Option<f64>,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// `mean -/+ t * sd / sqrt(n)` with the pinned t, or why there is none.
    pub t_interval: Result<(f64, f64), String>,
    /// sd / mean, where both exist and the mean is not 0.
    pub coefficient_of_variation: Option<f64>,
}

/// Summarizes one scalar over runs. `None` for no runs or a non-finite value (a missing run is
/// dropped by the caller and named, never imputed).
pub fn summarize(values: &[f64]) -> Option<RunSummary> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = values.len();
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    let mean = values.iter().sum::<f64>() / n as f64;
    let sd = (n >= 2)
        .then(|| (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt());
    let runs = pins::value::CAMPAIGN_RUNS as usize;
    let t_interval = match sd {
        Some(sd) if n == runs => {
            let half = pins::value::STATISTICS_T_QUANTILE_DF4 * sd / (n as f64).sqrt();
            Ok((mean - half, mean + half))
        }
        _ => Err(format!(
            "no t-interval: the pinned t = {} is for {runs} runs (df = {}), and {n} run{} remain",
            pins::value::STATISTICS_T_QUANTILE_DF4,
            runs - 1,
            if n == 1 { "" } else { "s" }
        )),
    };
    Some(RunSummary {
        median,
        mean,
        sd,
        min: sorted[0],
        max: sorted[n - 1],
        t_interval,
        coefficient_of_variation: sd.filter(|_| mean != 0.0).map(|sd| sd / mean.abs()),
        values: values.to_vec(),
    })
}

/// Holm's step-down adjustment: adjusted p-values in the input order. Sorted ascending, the i-th
/// smallest (1-based) is multiplied by `m - i + 1`, capped at 1, and made non-decreasing.
pub fn holm_adjusted(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0f64;
    for (i, &index) in order.iter().enumerate() {
        running = running.max(((m - i) as f64 * p_values[index]).min(1.0));
        adjusted[index] = running;
    }
    adjusted
}

/// Welch's two-sample t-test: (t, degrees of freedom, two-sided p-value), for comparing one
/// scalar between two variants' runs before Holm's correction. `None` with fewer than two values
/// on a side or no variance at all.
pub fn welch(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64)> {
    let moments = |x: &[f64]| {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (n, mean, var)
    };
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (na, ma, va) = moments(a);
    let (nb, mb, vb) = moments(b);
    let (sa, sb) = (va / na, vb / nb);
    let se2 = sa + sb;
    if se2 <= 0.0 || !se2.is_finite() {
        return None;
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    // Two-sided p = I_{df / (df + t^2)}(df / 2, 1 / 2).
    let p = regularized_beta(df / (df + t * t), df / 2.0, 0.5);
    Some((t, df, p.clamp(0.0, 1.0)))
}

/// ln Gamma(x) for x > 0 (Lanczos, g = 7, nine coefficients; relative error about 1e-15).
pub(crate) fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the series in its accurate range.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction (modified
/// Lentz), using the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges slowly.
pub(crate) fn regularized_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - regularized_beta(1.0 - x, b, a);
    }
    const TINY: f64 = 1e-300;
    let mut c = 1.0f64;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..=500 {
        let m = f64::from(m);
        // Even step.
        let num = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 + num * d;
        d = if d.abs() < TINY { 1.0 / TINY } else { 1.0 / d };
        c = 1.0 + num / c;
        if c.abs() < TINY {
            c = TINY;
        }
        f *= d * c;
        // Odd step.
        let num = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 + num * d;
        d = if d.abs() < TINY { 1.0 / TINY } else { 1.0 / d };
        c = 1.0 + num / c;
        if c.abs() < TINY {
            c = TINY;
        }
        let delta = d * c;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    front * f / a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_runs_by_hand() {
        let s = summarize(&[10.0, 12.0, 11.0, 14.0, 13.0]).unwrap();
        assert_eq!(s.values, [10.0, 12.0, 11.0, 14.0, 13.0]);
        assert_eq!((s.median, s.mean, s.min, s.max), (12.0, 12.0, 10.0, 14.0));
        // sd = sqrt((4 + 0 + 1 + 4 + 1) / 4) = sqrt(2.5); half-width 2.776 * sqrt(2.5) / sqrt(5) = 2.776 / sqrt(2).
        assert!((s.sd.unwrap() - 2.5f64.sqrt()).abs() < 1e-12);
        let (lo, hi) = s.t_interval.unwrap();
        let half = 2.776 / 2f64.sqrt();
        assert!((lo - (12.0 - half)).abs() < 1e-12 && (hi - (12.0 + half)).abs() < 1e-12);
        assert!((s.coefficient_of_variation.unwrap() - 2.5f64.sqrt() / 12.0).abs() < 1e-12);
    }

    #[test]
    fn fewer_runs_get_no_t_interval_and_nothing_is_imputed() {
        let s = summarize(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(s.t_interval.unwrap_err().contains("4 runs remain"));
        assert!(summarize(&[1.0]).unwrap().sd.is_none());
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn holm_by_hand() {
        // Sorted: 0.005 x4 = 0.02; 0.01 x3 = 0.03; 0.03 x2 = 0.06; 0.04 x1 = 0.04 -> raised to 0.06.
        let adjusted = holm_adjusted(&[0.01, 0.04, 0.03, 0.005]);
        let expected = [0.03, 0.06, 0.06, 0.02];
        for (a, e) in adjusted.iter().zip(expected) {
            assert!((a - e).abs() < 1e-15, "{adjusted:?}");
        }
        assert_eq!(holm_adjusted(&[0.6, 0.9]), [1.0, 1.0]);
        assert!(holm_adjusted(&[]).is_empty());
    }

    /// Fixtures from R (Debian's r-base-core), `Rscript welch.R` with:
    ///
    /// ```text
    /// a1 <- c(41.2, 38.9, 44.0, 40.3, 39.5); b1 <- c(35.1, 36.8, 34.2, 37.9, 35.5)
    /// a2 <- c(12.0, 15.5, 11.1, 30.2, 14.4); b2 <- c(13.3, 12.9, 14.1, 12.2, 13.8)
    /// a3 <- c(0.91, 0.93, 0.90, 0.95, 0.92); b3 <- c(0.905, 0.931, 0.899, 0.951, 0.921)
    /// for (p in list(list(a1,b1), list(a2,b2), list(a3,b3))) {
    ///   r <- t.test(p[[1]], p[[2]], var.equal = FALSE)
    ///   cat(sprintf("%.17g %.17g %.17g\n", r$statistic, r$parameter, r$p.value))
    /// }
    /// ```
    /// (sample a, sample b, t, df, p) as R printed them.
    type WelchCase<'a> = (&'a [f64], &'a [f64], f64, f64, f64);

    #[test]
    #[allow(clippy::excessive_precision)] // R's %.17g output, kept digit for digit
    fn welch_matches_r_t_test() {
        let cases: [WelchCase; 3] = [
            (
                &[41.2, 38.9, 44.0, 40.3, 39.5],
                &[35.1, 36.8, 34.2, 37.9, 35.5],
                4.4138050922837753,
                7.3205802488502405,
                0.0027851103384304403,
            ),
            (
                &[12.0, 15.5, 11.1, 30.2, 14.4],
                &[13.3, 12.9, 14.1, 12.2, 13.8],
                0.96637717169947979,
                4.0743133396442435,
                0.38764940315641971,
            ),
            (
                &[0.91, 0.93, 0.90, 0.95, 0.92],
                &[0.905, 0.931, 0.899, 0.951, 0.921],
                0.047292499583960972,
                7.9484702978705011,
                0.96344676547408858,
            ),
        ];
        for (a, b, t, df, p) in cases {
            let (got_t, got_df, got_p) = welch(a, b).unwrap();
            assert!(
                (got_t - t).abs() < 1e-12 * t.abs().max(1.0),
                "t {got_t} vs {t}"
            );
            assert!((got_df - df).abs() < 1e-10, "df {got_df} vs {df}");
            assert!((got_p - p).abs() < 1e-10, "p {got_p} vs {p}");
        }
        assert!(welch(&[1.0], &[2.0, 3.0]).is_none());
        assert!(welch(&[1.0, 1.0], &[1.0, 1.0]).is_none());
    }
}
