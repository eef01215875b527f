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
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1); `None` for one run.
    pub sd: Option<f64>,
    pub min: f64,
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
    let runs = pins::int("campaign.runs") as usize;
    let t_interval = match sd {
        Some(sd) if n == runs => {
            let half = pins::float("statistics.t_quantile_df4") * sd / (n as f64).sqrt();
            Ok((mean - half, mean + half))
        }
        _ => Err(format!(
            "no t-interval: the pinned t = {} is for {runs} runs (df = {}), and {n} run{} remain",
            pins::float("statistics.t_quantile_df4"),
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
}
