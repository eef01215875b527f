//! Quantile readings from the completion curve, and the two refusals (SPEC §3).
//!
//! Quantile q is read where the curve first reaches q, by the crossing test
//! `incidence >= q - tolerance` (tolerance pinned at 1e-9), and only inside the horizon (the
//! client timeout). Otherwise the reading is refused, in the form the ceiling decides:
//! `> horizon` with the ceiling when the ceiling reaches q, `unattainable` with the final
//! incidence and the ceiling when it does not.
//!
//! ```
//! use percentes_analyzer::estimate::incidence::{CompletionCurve, Fate, Method, Observation};
//! use percentes_analyzer::estimate::quantile::{read, Reading};
//! let obs: Vec<_> = (1..=100u64)
//!     .map(|i| Observation { time_ns: i * 1_000_000, fate: if i > 96 { Fate::Errored } else { Fate::Completed } })
//!     .collect();
//! let curve = CompletionCurve::estimate(&obs, Method::AalenJohansen);
//! assert_eq!(read(&curve, 0.5, 30_000_000_000, 1e-9), Reading::At { time_ns: 50_000_000 });
//! assert!(matches!(read(&curve, 0.99, 30_000_000_000, 1e-9), Reading::Unattainable { .. }));
//! ```

use super::incidence::CompletionCurve;

/// What a quantile reading says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reading {
    /// The curve reaches q at this latency.
    At {
        /// The latency, ns from t_i.
        time_ns: u64,
    },
    /// The curve does not reach q inside the horizon, but could: the ceiling is at least q.
    AboveHorizon {
        /// The highest the curve could reach.
        ceiling: f64,
    },
    /// The curve can never reach q: the ceiling is below it.
    Unattainable {
        /// The curve's last value.
        final_incidence: f64,
        /// The highest the curve could reach.
        ceiling: f64,
    },
}

/// Reads quantile `q` (in (0, 1)) from `curve`.
pub fn read(curve: &CompletionCurve, q: f64, horizon_ns: u64, tolerance: f64) -> Reading {
    let crossing = curve.steps.iter().find(|s| s.incidence >= q - tolerance);
    match crossing {
        Some(step) if step.time_ns <= horizon_ns => Reading::At {
            time_ns: step.time_ns,
        },
        _ => {
            let ceiling = curve.ceiling();
            if ceiling >= q - tolerance {
                Reading::AboveHorizon { ceiling }
            } else {
                Reading::Unattainable {
                    final_incidence: curve.final_incidence(),
                    ceiling,
                }
            }
        }
    }
}

/// The quantile's name as reports print it: 0.5 -> `p50`, 0.999 -> `p99.9`.
pub fn name(q: f64) -> String {
    let percent = format!("{:.4}", q * 100.0);
    let trimmed = percent.trim_end_matches('0').trim_end_matches('.');
    format!("p{trimmed}")
}

/// Seconds with millisecond resolution, as v0.1 and v0.2 reports print latencies (truncated).
fn seconds(ns: u64) -> String {
    format!("{}.{:03} s", ns / 1_000_000_000, (ns / 1_000_000) % 1000)
}

/// How a reading is printed: a rule of the spec version ([`percentes_formats::spec::Rules`]).
pub use percentes_formats::spec::Printing;

/// Seconds rounded to the nearest millisecond (half up).
pub fn seconds_rounded(ns: u64) -> String {
    percentes_formats::config::format_s(ns)
}

/// `value` to four decimals, or more where four would put it on the other side of `q` (up to
/// the shortest text that reads back exactly).
pub fn share_beside(value: f64, q: f64) -> String {
    for digits in 4..=12 {
        let text = format!("{value:.digits$}");
        let printed: f64 = text.parse().unwrap_or(value);
        if (printed < q) == (value < q) {
            return text;
        }
    }
    format!("{value}")
}

/// The reading in the words SPEC §3 fixes, e.g. `p99 = 1.234 s`,
/// `p99 > 30.000 s (horizon); ceiling 0.9950`,
/// `p99 unattainable; final incidence 0.9400, ceiling 0.9500`.
pub fn render(q: f64, reading: Reading, horizon_ns: u64) -> String {
    render_as(q, reading, horizon_ns, Printing::Archived)
}

/// [`render`], printed as `printing` says.
pub fn render_as(q: f64, reading: Reading, horizon_ns: u64, printing: Printing) -> String {
    let name = name(q);
    let secs = |ns: u64| match printing {
        Printing::Archived => seconds(ns),
        Printing::Honest => seconds_rounded(ns),
        // Under a millisecond, "0.000 s" says nothing: microseconds, rounded half up.
        Printing::Resolved if ns < 999_500 => format!("{} µs", (ns + 500) / 1000),
        Printing::Resolved => seconds_rounded(ns),
    };
    let share = |v: f64| match printing {
        Printing::Archived => format!("{v:.4}"),
        Printing::Honest | Printing::Resolved => share_beside(v, q),
    };
    match reading {
        Reading::At { time_ns } => format!("{name} = {}", secs(time_ns)),
        Reading::AboveHorizon { ceiling } => format!(
            "{name} > {} (horizon); ceiling {}",
            secs(horizon_ns),
            share(ceiling)
        ),
        Reading::Unattainable {
            final_incidence,
            ceiling,
        } => {
            format!(
                "{name} unattainable; final incidence {}, ceiling {}",
                share(final_incidence),
                share(ceiling)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::incidence::{Fate, Method, Observation};

    const HORIZON: u64 = 30_000;
    const TOL: f64 = 1e-9;

    fn curve(list: &[(u64, Fate)]) -> CompletionCurve {
        let obs: Vec<_> = list
            .iter()
            .map(|&(time_ns, fate)| Observation { time_ns, fate })
            .collect();
        CompletionCurve::estimate(&obs, Method::AalenJohansen)
    }

    #[test]
    fn honest_printing_rounds_and_never_contradicts_its_verdict() {
        // 0.1177 s: truncated 0.117, rounded 0.118; 0.1175 rounds half up.
        assert_eq!(seconds(117_700_000), "0.117 s");
        assert_eq!(seconds_rounded(117_700_000), "0.118 s");
        assert_eq!(seconds_rounded(117_500_000), "0.118 s");
        assert_eq!(seconds_rounded(117_499_999), "0.117 s");
        assert_eq!(seconds_rounded(999_500_000), "1.000 s");
        // 0.989975 prints 0.9900 to four decimals, which reaches p99; honestly it is 0.98998 (five decimals, still below 0.99).
        assert_eq!(format!("{:.4}", 0.989975), "0.9900");
        assert_eq!(share_beside(0.989975, 0.99), "0.98998");
        assert_eq!(share_beside(0.95, 0.99), "0.9500");
        let reading = Reading::Unattainable {
            final_incidence: 0.989975,
            ceiling: 0.989975,
        };
        assert_eq!(
            render_as(0.99, reading, 30_000_000_000, Printing::Honest),
            "p99 unattainable; final incidence 0.98998, ceiling 0.98998"
        );
        assert_eq!(
            render(0.99, reading, 30_000_000_000),
            "p99 unattainable; final incidence 0.9900, ceiling 0.9900"
        );
    }

    /// v0.5 (A4): a reading under a millisecond in microseconds, rounded half up; from the
    /// millisecond on, as v0.3 and v0.4 print it. Hand-worked: 171.4 us -> 171 µs, 999.5 us
    /// rounds to the millisecond (0.001 s, as Honest prints it), 1.2345 s -> 1.235 s.
    #[test]
    fn resolved_printing_reads_a_sub_millisecond_reading_in_microseconds() {
        let at = |ns| Reading::At { time_ns: ns };
        let printed = |ns, p| render_as(0.5, at(ns), 30_000_000_000, p);
        assert_eq!(printed(171_400, Printing::Honest), "p50 = 0.000 s");
        assert_eq!(printed(171_400, Printing::Resolved), "p50 = 171 µs");
        assert_eq!(printed(171_500, Printing::Resolved), "p50 = 172 µs");
        assert_eq!(printed(999_499, Printing::Resolved), "p50 = 999 µs");
        for ns in [999_500, 1_234_500_000] {
            assert_eq!(
                printed(ns, Printing::Resolved),
                printed(ns, Printing::Honest),
                "{ns}"
            );
        }
        assert_eq!(printed(1_234_500_000, Printing::Resolved), "p50 = 1.235 s");
    }

    #[test]
    fn both_refusal_forms() {
        // 8 complete by 8, 2 censored at the horizon: final 0.8, ceiling 1.0.
        let mut list: Vec<_> = (1..=8).map(|t| (t, Fate::Completed)).collect();
        list.extend([(HORIZON, Fate::Censored), (HORIZON, Fate::Censored)]);
        let c = curve(&list);
        assert_eq!(read(&c, 0.8, HORIZON, TOL), Reading::At { time_ns: 8 });
        assert_eq!(
            read(&c, 0.9, HORIZON, TOL),
            Reading::AboveHorizon { ceiling: 1.0 }
        );
        assert_eq!(
            render(0.9, read(&c, 0.9, HORIZON, TOL), 30_000_000_000),
            "p90 > 30.000 s (horizon); ceiling 1.0000"
        );

        // 8 complete, 2 errors: final 0.8 = ceiling; p90 can never be reached.
        let mut list: Vec<_> = (1..=8).map(|t| (t, Fate::Completed)).collect();
        list.extend([(9, Fate::Errored), (10, Fate::Errored)]);
        let c = curve(&list);
        let reading = read(&c, 0.9, HORIZON, TOL);
        assert!(
            matches!(reading, Reading::Unattainable { final_incidence, ceiling } if (final_incidence - 0.8).abs() < 1e-15 && (ceiling - 0.8).abs() < 1e-15)
        );
        assert_eq!(
            render(0.9, reading, 30_000_000_000),
            "p90 unattainable; final incidence 0.8000, ceiling 0.8000"
        );
    }

    #[test]
    fn the_crossing_tolerance_absorbs_rounding_only() {
        // Three completions of three: incidence after the second is 2/3 in floating point.
        let c = curve(&[
            (1, Fate::Completed),
            (2, Fate::Completed),
            (3, Fate::Completed),
        ]);
        assert_eq!(
            read(&c, 2.0 / 3.0, HORIZON, TOL),
            Reading::At { time_ns: 2 }
        );
        assert_eq!(
            read(&c, 2.0 / 3.0 + 1e-6, HORIZON, TOL),
            Reading::At { time_ns: 3 }
        );
    }

    #[test]
    fn a_crossing_past_the_horizon_is_not_claimed() {
        // Re-based completions may land up to 50 ms past the horizon: on the curve, not read.
        let c = curve(&[(10, Fate::Completed), (HORIZON + 20, Fate::Completed)]);
        assert_eq!(read(&c, 0.5, HORIZON, TOL), Reading::At { time_ns: 10 });
        assert_eq!(
            read(&c, 0.99, HORIZON, TOL),
            Reading::AboveHorizon { ceiling: 1.0 }
        );
    }

    #[test]
    fn names() {
        assert_eq!(name(0.5), "p50");
        assert_eq!(name(0.99), "p99");
        assert_eq!(name(0.999), "p99.9");
        assert_eq!(name(0.95), "p95");
    }
}
