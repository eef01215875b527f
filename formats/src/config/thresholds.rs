//! User-set pass/fail thresholds (issue 37 item 4): `ttft_p99 < 500ms`, `error_rate < 1%`,
//! `goodput@fault >= 90%`. They are a user's own acceptance criteria, checked after the analysis
//! against the figures the report publishes; they add checks to the pinned validity gates and
//! never replace or weaken one (SPEC §9 "Thresholds"). This module only reads them: the analyzer
//! evaluates them.
//!
//! Grammar: `METRIC[@WINDOW] OP VALUE`, with OP one of `<`, `<=`, `>`, `>=`. A latency's VALUE
//! carries its unit (`us`, `µs`, `ms`, `s`); a share is a percentage (`1%`) or a fraction in
//! 0..=1; a rate is a number, optionally followed by `/s`. Without `@WINDOW` a threshold reads
//! the run's main window: `measurement`, or `baseline` in a fault run.

use std::fmt;

/// What a metric measures, which fixes how its value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A latency quantile, in seconds.
    Latency,
    /// A share of the window's scheduled requests, 0..=1.
    Share,
    /// A count per second.
    Rate,
    /// A count (tokens): a plain number, `tokens` after it optional.
    Count,
}

/// The latencies a quantile threshold may name: the completed-only distributions, and the
/// completion curve over every scheduled request (§3). From v0.5 (A4) also the time to first
/// answer token (`ttfat`) and the reasoning span (`reasoning`).
pub const LATENCIES: [&str; 7] = [
    "ttft",
    "tpot",
    "itl",
    "e2e",
    "completion",
    "ttfat",
    "reasoning",
];
/// The counts a quantile threshold may name (A4): the usage's reasoning tokens.
pub const COUNTS: [&str; 1] = ["reasoning_tokens"];
/// The quantiles a latency threshold may name.
pub const QUANTILES: [&str; 4] = ["p50", "p90", "p95", "p99"];
/// The metrics that are not quantiles, with their kinds. `goodput` is read under the declared
/// SLO where the configuration declares one (from v0.5, SPEC §4 "A declared SLO"),
/// `pinned_goodput` always under the pinned one.
pub const SCALARS: [(&str, Kind); 6] = [
    ("error_rate", Kind::Share),
    ("censored_rate", Kind::Share),
    ("goodput", Kind::Share),
    ("pinned_goodput", Kind::Share),
    ("requests_per_s", Kind::Rate),
    ("output_tokens_per_s", Kind::Rate),
];

/// The windows a report has (SPEC §3): a run without a fault `warm-up`, `measurement` and
/// `cooldown`; a fault run `warm-up`, `baseline`, `guard`, `fault`, `recovery` and `cooldown`.
/// A threshold may name only these.
pub const WINDOWS: [&str; 7] = [
    "warm-up",
    "measurement",
    "baseline",
    "guard",
    "fault",
    "recovery",
    "cooldown",
];

/// The windows of a run without a fault, and of a fault run ([`WINDOWS`]).
pub fn windows_of(fault_run: bool) -> &'static [&'static str] {
    if fault_run {
        &[
            "warm-up", "baseline", "guard", "fault", "recovery", "cooldown",
        ]
    } else {
        &["warm-up", "measurement", "cooldown"]
    }
}

impl Threshold {
    /// A threshold as `--fail-on` gives it: readable, and on a window a report has (whether
    /// the run has it is known once its journal is read; a threshold on a window it lacks fails
    /// there, with the reason).
    pub fn parse_flag(text: &str) -> Result<Threshold, super::quick::FlagError> {
        let problem = match Threshold::parse(text) {
            Ok(t) => match t.window_problem(&WINDOWS) {
                None => return Ok(t),
                Some(why) => why,
            },
            Err(why) => why,
        };
        Err(super::quick::FlagError {
            flag: "--fail-on",
            problem: problem.to_string(),
        })
    }

    /// Why the threshold cannot be read on a run of these windows ([`windows_of`]), if it
    /// cannot: it names a window no report has, or one such a run lacks. Checked where a
    /// threshold is given for a new reading (a configuration loaded to record, `--fail-on`); a
    /// journal's own configuration is read as recorded, and a threshold on a window its run
    /// lacks fails there with the reason.
    pub fn window_problem(&self, windows: &[&str]) -> Option<ThresholdError> {
        let window = self.window.as_deref()?;
        if windows.contains(&window) {
            return None;
        }
        let (text, window) = (self.text.clone(), window.to_owned());
        Some(if WINDOWS.contains(&window.as_str()) {
            ThresholdError::WindowAbsent {
                text,
                window,
                windows: windows.join(", "),
            }
        } else {
            ThresholdError::NoSuchWindow { text, window }
        })
    }
}

/// What is wrong with a threshold, with what to write instead.
#[derive(Clone, Debug, PartialEq)]
pub enum ThresholdError {
    /// No `<`, `<=`, `>` or `>=` in it.
    NoComparison {
        /// The threshold as written.
        text: String,
    },
    /// A metric no threshold may name.
    UnknownMetric {
        /// The threshold as written.
        text: String,
        /// The metric as written.
        metric: String,
    },
    /// `@` followed by something that is not a window's name.
    NotAWindowName {
        /// The threshold as written.
        text: String,
        /// What follows `@`.
        window: String,
    },
    /// A window no report has.
    NoSuchWindow {
        /// The threshold as written.
        text: String,
        /// The window named.
        window: String,
    },
    /// A window reports have, but not this run's.
    WindowAbsent {
        /// The threshold as written.
        text: String,
        /// The window named.
        window: String,
        /// The run's windows, listed.
        windows: String,
    },
    /// The limit is wrong for its metric.
    Limit {
        /// The threshold as written.
        text: String,
        /// What is wrong with the limit.
        limit: LimitProblem,
    },
}

/// What is wrong with a threshold's limit.
#[derive(Clone, Debug, PartialEq)]
pub enum LimitProblem {
    /// A latency written without its unit.
    NoUnit {
        /// The value as written.
        value: String,
    },
    /// A latency whose unit is not one of time.
    NotAUnit {
        /// The unit as written.
        unit: String,
        /// The number before it.
        digits: String,
    },
    /// Not a non-negative number.
    NotANumber {
        /// The value as written.
        value: String,
    },
    /// A share above 1 (100 %).
    ShareAboveOne {
        /// The value as written.
        value: String,
    },
}

impl fmt::Display for ThresholdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThresholdError::NoComparison { text } => write!(f, "`{text}` has no comparison: write METRIC OP VALUE, e.g. `ttft_p99 < 500ms` (OP is <, <=, > or >=)"),
            ThresholdError::UnknownMetric { text, metric } => write!(
                f,
                "`{text}`: no metric `{metric}`; the metrics are {}",
                metric_names().join(", ")
            ),
            ThresholdError::NotAWindowName { text, window } => write!(f, "`{text}`: `@{window}` is not a window name (baseline, fault, recovery, measurement, ...)"),
            ThresholdError::NoSuchWindow { text, window } => write!(
                f,
                "`{text}`: `@{window}` is not a window a report has; the windows are {}",
                WINDOWS.join(", ")
            ),
            ThresholdError::WindowAbsent {
                text,
                window,
                windows,
            } => write!(
                f,
                "`{text}` reads window `{window}`, which this run does not have; its windows are {windows}"
            ),
            ThresholdError::Limit { text, limit } => write!(f, "`{text}`: {limit}"),
        }
    }
}

impl fmt::Display for LimitProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitProblem::NoUnit { value } => write!(
                f,
                "a latency needs its unit: `{value}us`, `{value}ms` or `{value}s`"
            ),
            LimitProblem::NotAUnit { unit, digits } => write!(
                f,
                "`{unit}` is not a unit of time: a latency is written `{digits}us`, `{digits}ms` or `{digits}s`"
            ),
            LimitProblem::NotANumber { value } => write!(f, "`{value}` is not a non-negative number"),
            LimitProblem::ShareAboveOne { value } => {
                write!(f, "a share lies in 0..=1 (or 0%..=100%), not {value}")
            }
        }
    }
}

impl std::error::Error for ThresholdError {}

/// The most thresholds a run may carry (config and flags together).
pub const THRESHOLDS_MAX: usize = 64;

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Below,
    /// `<=`
    AtMost,
    /// `>`
    Above,
    /// `>=`
    AtLeast,
}

impl Op {
    /// Its symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Below => "<",
            Op::AtMost => "<=",
            Op::Above => ">",
            Op::AtLeast => ">=",
        }
    }

    /// Whether `value OP limit` holds.
    pub fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Below => value < limit,
            Op::AtMost => value <= limit,
            Op::Above => value > limit,
            Op::AtLeast => value >= limit,
        }
    }
}

/// One threshold, read.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// As the user wrote it, trimmed.
    pub text: String,
    /// The metric's name (`ttft_p99`, `error_rate`).
    pub metric: String,
    /// What it measures.
    pub kind: Kind,
    /// The window it reads; `None` for the run's main window.
    pub window: Option<String>,
    /// The comparison.
    pub op: Op,
    /// The limit in the metric's own unit: seconds, a fraction, or per second.
    pub limit: f64,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The metric names a threshold may use, for error messages and help.
pub fn metric_names() -> Vec<String> {
    let mut names: Vec<String> = LATENCIES
        .iter()
        .flat_map(|l| QUANTILES.iter().map(move |q| format!("{l}_{q}")))
        .collect();
    names.extend(
        COUNTS
            .iter()
            .flat_map(|c| QUANTILES.iter().map(move |q| format!("{c}_{q}"))),
    );
    names.extend(SCALARS.iter().map(|(n, _)| (*n).to_owned()));
    names
}

fn kind_of(metric: &str) -> Option<Kind> {
    if let Some((_, kind)) = SCALARS.iter().find(|(n, _)| *n == metric) {
        return Some(*kind);
    }
    let (latency, quantile) = metric.rsplit_once('_')?;
    if !QUANTILES.contains(&quantile) {
        return None;
    }
    if COUNTS.contains(&latency) {
        return Some(Kind::Count);
    }
    LATENCIES.contains(&latency).then_some(Kind::Latency)
}

impl Threshold {
    /// Reads one threshold; the error says what is wrong and what is expected.
    pub fn parse(text: &str) -> Result<Threshold, ThresholdError> {
        let text = text.trim();
        let owned = || text.to_owned();
        let at = text
            .find(['<', '>'])
            .ok_or_else(|| ThresholdError::NoComparison { text: owned() })?;
        let (left, right) = text.split_at(at);
        let (op, value) = match right
            .strip_prefix("<=")
            .or_else(|| right.strip_prefix(">="))
        {
            Some(value) if right.starts_with('<') => (Op::AtMost, value),
            Some(value) => (Op::AtLeast, value),
            None if right.starts_with('<') => (Op::Below, &right[1..]),
            None => (Op::Above, &right[1..]),
        };
        let (metric, window) = match left.trim().split_once('@') {
            Some((m, w)) => (m.trim(), Some(w.trim())),
            None => (left.trim(), None),
        };
        let kind = kind_of(metric).ok_or_else(|| ThresholdError::UnknownMetric {
            text: owned(),
            metric: metric.to_owned(),
        })?;
        if let Some(window) = window {
            let ok = !window.is_empty()
                && window
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !ok {
                return Err(ThresholdError::NotAWindowName {
                    text: owned(),
                    window: window.to_owned(),
                });
            }
        }
        let limit = limit(kind, value.trim()).map_err(|limit| ThresholdError::Limit {
            text: owned(),
            limit,
        })?;
        Ok(Threshold {
            text: owned(),
            metric: metric.to_owned(),
            kind,
            window: window.map(str::to_owned),
            op,
            limit,
        })
    }
}

fn number(s: &str) -> Result<f64, LimitProblem> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(LimitProblem::NotANumber {
            value: s.to_owned(),
        }),
    }
}

/// `value` as its number and the unit written after it (`5 parsecs`: `5` and `parsecs`), the
/// unit trimmed; the number is what a float may be written as.
fn number_and_unit(value: &str) -> (&str, &str) {
    let end = value
        .char_indices()
        .find(|&(i, c)| {
            let exponent = matches!(c, 'e' | 'E')
                && value[..i].ends_with(|d: char| d.is_ascii_digit())
                && value[i + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '-' || d == '+');
            !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+') || exponent)
        })
        .map_or(value.len(), |(i, _)| i);
    (value[..end].trim(), value[end..].trim())
}

fn limit(kind: Kind, value: &str) -> Result<f64, LimitProblem> {
    match kind {
        Kind::Latency => {
            let (digits, unit) = number_and_unit(value);
            let scale = match unit {
                "ms" => 1e3,
                "us" | "µs" => 1e6,
                "s" => 1.0,
                "" => {
                    return Err(LimitProblem::NoUnit {
                        value: value.to_owned(),
                    })
                }
                other => {
                    return Err(LimitProblem::NotAUnit {
                        unit: other.to_owned(),
                        digits: digits.to_owned(),
                    })
                }
            };
            // Divided, so that `800us` is the double nearest 0.0008 s, as `800e-6` is.
            Ok(number(digits)? / scale)
        }
        Kind::Share => {
            let fraction = match value.strip_suffix('%') {
                Some(v) => number(v)? / 100.0,
                None => number(value)?,
            };
            if fraction > 1.0 {
                return Err(LimitProblem::ShareAboveOne {
                    value: value.to_owned(),
                });
            }
            Ok(fraction)
        }
        Kind::Rate => number(value.strip_suffix("/s").unwrap_or(value)),
        Kind::Count => number(value.strip_suffix("tokens").unwrap_or(value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_figures_of_a4_are_metrics() {
        let t = Threshold::parse("ttfat_p99@baseline < 2s").unwrap();
        assert_eq!((t.kind, t.limit), (Kind::Latency, 2.0));
        let t = Threshold::parse("reasoning_tokens_p50 <= 400 tokens").unwrap();
        assert_eq!((t.kind, t.limit), (Kind::Count, 400.0));
        assert_eq!(
            Threshold::parse("reasoning_p90 < 1s").unwrap().kind,
            Kind::Latency
        );
        assert!(Threshold::parse("reasoning_tokens_p50 < 1s").is_err());
        assert!(metric_names().contains(&"reasoning_tokens_p99".to_owned()));
    }

    #[test]
    fn thresholds_read_their_metric_window_comparison_and_unit() {
        let t = Threshold::parse(" ttft_p99 < 500ms ").unwrap();
        assert_eq!(
            (t.metric.as_str(), t.window, t.op, t.kind),
            ("ttft_p99", None, Op::Below, Kind::Latency)
        );
        assert!((t.limit - 0.5).abs() < 1e-15);
        let t = Threshold::parse("goodput@fault>=90%").unwrap();
        assert_eq!((t.window.as_deref(), t.op), (Some("fault"), Op::AtLeast));
        assert!((t.limit - 0.9).abs() < 1e-15);
        assert_eq!(Threshold::parse("error_rate <= 0.01").unwrap().limit, 0.01);
        assert_eq!(
            Threshold::parse("requests_per_s > 9.5/s").unwrap().limit,
            9.5
        );
        // A unit that is none names itself, not the number (issue 54 item 6).
        let parsecs = Threshold::parse("ttft_p99 < 5 parsecs").unwrap_err();
        assert!(
            matches!(&parsecs, ThresholdError::Limit { limit: LimitProblem::NotAUnit { unit, digits }, .. } if unit == "parsecs" && digits == "5"),
            "{parsecs:?}"
        );
        let parsecs = parsecs.to_string();
        assert!(
            parsecs.contains("`parsecs` is not a unit of time")
                && parsecs.contains("`5ms`")
                && !parsecs.contains("not a non-negative number"),
            "{parsecs}"
        );
        assert_eq!(Threshold::parse("ttft_p99 < 5 ms").unwrap().limit, 0.005);
        assert_eq!(Threshold::parse("e2e_p50 < 1.5e-3s").unwrap().limit, 0.0015);
        assert!(Threshold::parse("ttft_p99 < 5")
            .unwrap_err()
            .to_string()
            .contains("needs its unit"));
        assert_eq!(Threshold::parse("e2e_p50 < 2s").unwrap().limit, 2.0);
        assert_eq!(Threshold::parse("itl_p90 < 800us").unwrap().limit, 800e-6);
        assert_eq!(
            Threshold::parse("completion_p99 < 3s").unwrap().kind,
            Kind::Latency
        );
    }

    #[test]
    fn a_bad_threshold_says_what_is_wrong() {
        // Each refusal is a kind a caller can act on, and its words say what to write.
        let kind = |text: &str| Threshold::parse(text).unwrap_err();
        let e = kind("ttft_p99 500ms");
        assert!(matches!(e, ThresholdError::NoComparison { .. }), "{e:?}");
        assert!(e.to_string().contains("no comparison"), "{e}");
        let e = kind("ttft_p98 < 500ms");
        assert!(
            matches!(&e, ThresholdError::UnknownMetric { metric, .. } if metric == "ttft_p98"),
            "{e:?}"
        );
        assert!(e.to_string().contains("ttft_p99"), "{e}");
        let limit = |text: &str| match kind(text) {
            ThresholdError::Limit { limit, .. } => limit,
            other => panic!("{text}: {other:?}"),
        };
        assert!(matches!(
            limit("ttft_p99 < 500"),
            LimitProblem::NoUnit { .. }
        ));
        assert!(matches!(
            limit("error_rate < 150%"),
            LimitProblem::ShareAboveOne { .. }
        ));
        assert!(matches!(
            limit("error_rate < -1%"),
            LimitProblem::NotANumber { .. }
        ));
        assert!(kind("error_rate < 150%").to_string().contains("0..=1"));
        let e = kind("goodput@ < 1%");
        assert!(matches!(e, ThresholdError::NotAWindowName { .. }), "{e:?}");
        assert!(e.to_string().contains("window"), "{e}");
        // A window no report has, and one this run lacks.
        let t = Threshold::parse("error_rate@fault < 1%").unwrap();
        let absent = t.window_problem(windows_of(false)).unwrap();
        assert!(
            matches!(absent, ThresholdError::WindowAbsent { .. }),
            "{absent:?}"
        );
        assert!(
            absent.to_string().contains("which this run does not have"),
            "{absent}"
        );
        let t = Threshold::parse("error_rate@outage < 1%").unwrap();
        let none = t.window_problem(&WINDOWS).unwrap();
        assert!(
            matches!(none, ThresholdError::NoSuchWindow { .. }),
            "{none:?}"
        );
        assert!(t.window_problem(&["outage"]).is_none());
        assert!(Threshold::parse("ttft_p99 < NaNs").is_err());
    }

    #[test]
    fn comparisons_hold_as_written() {
        assert!(Op::Below.holds(1.0, 2.0) && !Op::Below.holds(2.0, 2.0));
        assert!(Op::AtMost.holds(2.0, 2.0) && !Op::AtMost.holds(2.1, 2.0));
        assert!(Op::Above.holds(3.0, 2.0) && !Op::Above.holds(2.0, 2.0));
        assert!(Op::AtLeast.holds(2.0, 2.0) && !Op::AtLeast.holds(1.9, 2.0));
    }
}
