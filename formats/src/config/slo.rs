//! The user's own SLO (SPEC §4 "A declared SLO", issue 55 item 1): `[slo] declared =
//! ["ttft <= 500ms", "tpot <= 50ms"]` in a configuration, `--slo 'ttft<=500ms,tpot<=50ms'` in a
//! quick run, and per route `[slo.routes] chat = ["ttft <= 300ms"]`, which replaces the run's
//! list for that route's requests. The pinned §4 SLO is unchanged beside it and keeps driving
//! the recovery detector; the declared one is a second goodput, named as the user's.
//!
//! The configuration carries it, so the journal's header does: it is part of what the run
//! claims, and an auditor reads the same objectives the report judged against. This module only
//! reads it; the analyzer judges each request.
//!
//! Grammar of one objective: `METRIC OP VALUE`, METRIC one of [`METRICS`], OP `<=` or `<` (an
//! objective bounds a latency from above), VALUE a positive time with its unit (`us`, `µs`,
//! `ms`, `s`). A metric appears at most once in a list. The run's list may also state the
//! goodput the SLO must keep for a rate to count as within it: `goodput >= 95%` (default
//! [`TARGET_DEFAULT`], the share a calibration step must reach, `calibration.step_goodput_min`,
//! §10); `sweep` and `calibrate` name the highest rate that kept it "capacity under your SLO".

use std::collections::BTreeMap;
use std::fmt;

/// What an objective bounds, per request (SPEC §4 "A declared SLO" defines each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SloMetric {
    /// Time to first token from t_i, as the report's TTFT reads it.
    Ttft,
    /// Time to first answer token from t_i (the first answer delta).
    Ttfat,
    /// Time per output token, (e2e - TTFT) / (completion tokens - 1).
    Tpot,
    /// The longest gap between two deliveries of the request's stream.
    Itl,
    /// End-to-end latency from t_i.
    E2e,
}

/// The metric names an objective may use, in the order a report lists them.
pub const METRICS: [(&str, SloMetric); 5] = [
    ("ttft", SloMetric::Ttft),
    ("ttfat", SloMetric::Ttfat),
    ("tpot", SloMetric::Tpot),
    ("itl", SloMetric::Itl),
    ("e2e", SloMetric::E2e),
];

impl SloMetric {
    /// Its name as written.
    pub fn name(self) -> &'static str {
        METRICS
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }
}

/// The goodput a rate must keep under the declared SLO to count as within it, where the list
/// states none: the calibration step's own (`calibration.step_goodput_min`, §10).
pub const TARGET_DEFAULT: f64 = crate::pins::value::CALIBRATION_STEP_GOODPUT_MIN;
/// The most routes `[slo.routes]` may name.
pub const ROUTES_MAX: usize = 64;

/// One objective, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Objective {
    /// What it bounds.
    pub metric: SloMetric,
    /// `<=` (true) or `<`.
    pub inclusive: bool,
    /// The bound, ns.
    pub limit_ns: u64,
}

impl Objective {
    /// Whether a request's value of the metric, ns, meets it.
    pub fn met_by(&self, value_ns: u64) -> bool {
        if self.inclusive {
            value_ns <= self.limit_ns
        } else {
            value_ns < self.limit_ns
        }
    }
}

impl fmt::Display for Objective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.inclusive { "<=" } else { "<" };
        let ns = self.limit_ns;
        let limit = if ns.is_multiple_of(1_000_000_000) {
            format!("{}s", ns / 1_000_000_000)
        } else if ns.is_multiple_of(1_000_000) {
            format!("{}ms", ns / 1_000_000)
        } else if ns.is_multiple_of(1_000) {
            format!("{}us", ns / 1_000)
        } else {
            format!("{:.3}us", ns as f64 / 1e3)
        };
        write!(f, "{}{op}{limit}", self.metric.name())
    }
}

/// What is wrong with an objective or a list of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SloError {
    /// No `<=` or `<` in it.
    NoComparison {
        /// The objective as written.
        text: String,
    },
    /// A lower bound (`>`, `>=`): an objective bounds a latency from above.
    LowerBound {
        /// The objective as written.
        text: String,
    },
    /// A metric no objective may name.
    UnknownMetric {
        /// The name as written.
        metric: String,
    },
    /// A value that is not a positive time with its unit.
    NotATime {
        /// The value as written.
        value: String,
    },
    /// A goodput target that is not a share above 0 and at most 100 %, or one in a route's
    /// list (the target is the run's).
    Target {
        /// The target as written.
        text: String,
    },
    /// The same metric twice in one list.
    Repeated {
        /// The metric.
        metric: &'static str,
    },
    /// A list with nothing in it.
    Empty,
    /// More routes than [`ROUTES_MAX`].
    TooManyRoutes {
        /// How many were given.
        given: usize,
    },
}

impl fmt::Display for SloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = METRICS.iter().map(|(n, _)| *n).collect();
        match self {
            SloError::NoComparison { text } => write!(
                f,
                "`{text}` has no comparison: write METRIC <= VALUE, e.g. `ttft <= 500ms`"
            ),
            SloError::LowerBound { text } => write!(
                f,
                "`{text}` bounds a latency from below; an objective is an upper bound: `<=` or `<`"
            ),
            SloError::UnknownMetric { metric } => write!(
                f,
                "no objective metric `{metric}`; the metrics are {} (per request, SPEC §4 \"A declared SLO\")",
                names.join(", ")
            ),
            SloError::NotATime { value } => write!(
                f,
                "`{value}` is not a positive time with its unit: write it as `500ms`, `800us` or `2s`"
            ),
            SloError::Target { text } => write!(
                f,
                "`{text}`: a goodput target is `goodput >= SHARE`, a share above 0 and at most 100 % (`goodput >= 95%`), once, in the run's list only"
            ),
            SloError::Repeated { metric } => {
                write!(f, "`{metric}` is bounded twice; keep one objective per metric")
            }
            SloError::Empty => write!(
                f,
                "names no objective; give at least one, e.g. `ttft <= 500ms` (or leave the SLO out)"
            ),
            SloError::TooManyRoutes { given } => write!(
                f,
                "names {given} routes; at most {ROUTES_MAX} may have their own objectives"
            ),
        }
    }
}

impl std::error::Error for SloError {}

/// One objective from its text.
pub fn objective(text: &str) -> Result<Objective, SloError> {
    let text = text.trim();
    let at = text.find(['<', '>', '=']).ok_or(SloError::NoComparison {
        text: text.to_owned(),
    })?;
    let (left, right) = text.split_at(at);
    let (inclusive, value) = match (right.strip_prefix("<="), right.strip_prefix('<')) {
        (Some(value), _) => (true, value),
        (None, Some(value)) => (false, value),
        (None, None) if right.starts_with('>') => {
            return Err(SloError::LowerBound {
                text: text.to_owned(),
            })
        }
        (None, None) => {
            return Err(SloError::NoComparison {
                text: text.to_owned(),
            })
        }
    };
    let name = left.trim();
    let metric = METRICS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, m)| *m)
        .ok_or_else(|| SloError::UnknownMetric {
            metric: name.to_owned(),
        })?;
    let limit_ns = time_ns(value.trim()).ok_or_else(|| SloError::NotATime {
        value: value.trim().to_owned(),
    })?;
    Ok(Objective {
        metric,
        inclusive,
        limit_ns,
    })
}

/// A positive time with its unit, in whole nanoseconds (at least 1).
fn time_ns(value: &str) -> Option<u64> {
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (digits, unit) = (value[..split].trim(), value[split..].trim());
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        _ => return None,
    };
    let number: f64 = digits.parse().ok()?;
    let ns = (number * scale).round();
    (number.is_finite() && number > 0.0 && (1.0..1e18).contains(&ns)).then_some(ns as u64)
}

/// `goodput >= 95%` as a share (0.95), if `text` is a goodput target at all.
fn target(text: &str) -> Option<Result<f64, SloError>> {
    let rest = text.trim().strip_prefix("goodput")?;
    let refused = || SloError::Target {
        text: text.trim().to_owned(),
    };
    let Some(value) = rest.trim_start().strip_prefix(">=") else {
        return Some(Err(refused()));
    };
    let value = value.trim();
    let share = match value.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
        None => value.parse::<f64>(),
    };
    Some(match share {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(refused()),
    })
}

/// A goodput target as a list writes it: `goodput>=95%` (to a ten-thousandth of a percent).
pub fn target_text(share: f64) -> String {
    format!("goodput>={}%", (share * 1e6).round() / 1e4)
}

/// A list of objectives, each from its own text; none repeated, at least one; and the goodput
/// target where the list states one.
pub fn objectives_and_target<'a>(
    texts: impl IntoIterator<Item = &'a str>,
) -> Result<(Vec<Objective>, Option<f64>), SloError> {
    let mut rest = Vec::new();
    let mut goal = None;
    for text in texts {
        match target(text) {
            Some(_) if goal.is_some() => {
                return Err(SloError::Target {
                    text: text.trim().to_owned(),
                })
            }
            Some(share) => goal = Some(share?),
            None => rest.push(text),
        }
    }
    Ok((objectives(rest)?, goal))
}

/// A list of objectives, each from its own text; none repeated, at least one.
pub fn objectives<'a>(
    texts: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Objective>, SloError> {
    let mut out: Vec<Objective> = Vec::new();
    for text in texts {
        if target(text).is_some() {
            return Err(SloError::Target {
                text: text.trim().to_owned(),
            });
        }
        let o = objective(text)?;
        if out.iter().any(|seen| seen.metric == o.metric) {
            return Err(SloError::Repeated {
                metric: o.metric.name(),
            });
        }
        out.push(o);
    }
    if out.is_empty() {
        return Err(SloError::Empty);
    }
    out.sort_by_key(|o| o.metric);
    Ok(out)
}

/// `--slo` as given: objectives separated by commas, and the goodput target if stated.
pub fn flag(text: &str) -> Result<(Vec<Objective>, Option<f64>), SloError> {
    objectives_and_target(text.split(',').filter(|t| !t.trim().is_empty()))
}

/// `--slo` as a command line reads it: the text as given, once [`flag`] reads it.
pub fn flag_text(text: &str) -> Result<String, SloError> {
    flag(text).map(|_| text.to_owned())
}

/// A declared SLO: the run's objectives, and each route's own where it has them.
#[derive(Clone, Debug, PartialEq)]
pub struct DeclaredSlo {
    /// Every request's objectives, unless its route has its own.
    pub objectives: Vec<Objective>,
    /// A route's own objectives, by its label: they replace the run's for its requests.
    pub routes: BTreeMap<String, Vec<Objective>>,
    /// The goodput a rate must keep to count as within the SLO, as stated (`None`: the
    /// default, [`TARGET_DEFAULT`]).
    pub target: Option<f64>,
}

impl DeclaredSlo {
    /// The objectives a request of the route `label` is judged by.
    pub fn for_route(&self, label: &str) -> &[Objective] {
        self.routes.get(label).unwrap_or(&self.objectives)
    }

    /// The goodput target in force: the stated one, else [`TARGET_DEFAULT`].
    pub fn target(&self) -> f64 {
        self.target.unwrap_or(TARGET_DEFAULT)
    }

    /// Every metric any objective bounds.
    pub fn metrics(&self) -> Vec<SloMetric> {
        let mut all: Vec<SloMetric> = self
            .objectives
            .iter()
            .chain(self.routes.values().flatten())
            .map(|o| o.metric)
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

impl fmt::Display for DeclaredSlo {
    /// `ttft<=500ms, tpot<=50ms`, then `; route chat: ttft<=300ms` for each route's own.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |o: &[Objective]| {
            o.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        f.write_str(&list(&self.objectives))?;
        if let Some(target) = self.target {
            write!(f, ", {}", target_text(target))?;
        }
        for (route, objectives) in &self.routes {
            write!(f, "; route {route}: {}", list(objectives))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_read_their_metric_bound_and_unit() {
        let o = objective(" ttft <= 500ms ").unwrap();
        assert_eq!(
            (o.metric, o.inclusive, o.limit_ns),
            (SloMetric::Ttft, true, 500_000_000)
        );
        let o = objective("tpot<50ms").unwrap();
        assert_eq!((o.inclusive, o.limit_ns), (false, 50_000_000));
        assert_eq!(objective("itl <= 800us").unwrap().limit_ns, 800_000);
        assert_eq!(objective("itl <= 2.5 µs").unwrap().limit_ns, 2_500);
        assert_eq!(objective("e2e <= 1.5s").unwrap().limit_ns, 1_500_000_000);
        // Inclusive and strict differ exactly at the bound.
        let (le, lt) = (objective("e2e<=2s").unwrap(), objective("e2e<2s").unwrap());
        assert!(le.met_by(2_000_000_000) && !lt.met_by(2_000_000_000));
        assert!(lt.met_by(1_999_999_999) && !le.met_by(2_000_000_001));
        assert_eq!(objective("ttfat<=1s").unwrap().to_string(), "ttfat<=1s");
        assert_eq!(objective("itl<0.8ms").unwrap().to_string(), "itl<800us");
    }

    #[test]
    fn a_bad_objective_says_what_is_wrong() {
        let says = |text: &str, part: &str| {
            let e = flag(text).unwrap_err().to_string();
            assert!(e.contains(part), "{text}: {e}");
        };
        says("ttft 500ms", "no comparison");
        says("ttft >= 500ms", "upper bound");
        says("ttft_p99 <= 500ms", "no objective metric `ttft_p99`");
        says("ttft <= 500", "not a positive time");
        says("ttft <= 0ms", "not a positive time");
        says("ttft <= -5ms", "not a positive time");
        says("ttft <= NaNms", "not a positive time");
        says("ttft <= 5 parsecs", "not a positive time");
        says("ttft <= 1s, ttft < 2s", "bounded twice");
        says(" , ", "names no objective");
        says("ttft = 5ms", "no comparison");
        says("ttft<=1s, goodput >= 120%", "a goodput target");
        says("ttft<=1s, goodput > 95%", "a goodput target");
        says("ttft<=1s, goodput>=95%, goodput>=90%", "once");
        // A target alone bounds nothing.
        says("goodput >= 95%", "names no objective");
        assert!(objectives(["goodput >= 95%"]).is_err());
    }

    #[test]
    fn a_flag_lists_objectives_and_a_route_replaces_the_run_list() {
        let (run, target) = flag("tpot<=50ms,ttft<=500ms, goodput >= 95%").unwrap();
        assert_eq!(target, Some(0.95));
        assert_eq!(flag("ttft<=1s").unwrap().1, None);
        assert_eq!(flag("ttft<=1s,goodput>=0.9").unwrap().1, Some(0.9));
        assert_eq!(target_text(0.07), "goodput>=7%");
        assert_eq!(target_text(0.995), "goodput>=99.5%");
        // Listed in the metrics' order, whatever the order written.
        assert_eq!(run[0].metric, SloMetric::Ttft);
        let slo = DeclaredSlo {
            objectives: run,
            routes: [("chat".to_owned(), flag("ttft<=300ms").unwrap().0)].into(),
            target,
        };
        assert_eq!(slo.target(), 0.95);
        assert_eq!(slo.for_route("chat").len(), 1);
        assert_eq!(slo.for_route("batch").len(), 2);
        assert_eq!(slo.metrics(), vec![SloMetric::Ttft, SloMetric::Tpot]);
        assert_eq!(
            slo.to_string(),
            "ttft<=500ms, tpot<=50ms, goodput>=95%; route chat: ttft<=300ms"
        );
        assert_eq!(
            DeclaredSlo {
                target: None,
                ..slo
            }
            .target(),
            TARGET_DEFAULT
        );
    }
}
