//! A load sweep read back (issue 18 item 4): one journal per offered rate, each analyzed as
//! `analyze` would, summarized as latency against load. Each point keeps its own refusals: a p99
//! the sample cannot support says so in its cell, and a recording the client gate invalidated
//! publishes nothing for its rate, exactly as its own report would.
//!
//! Pure functions of the per-rate reports: `percentes sweep` (the study crate) records, this
//! module reads.

use std::fmt::Write as _;

use serde::Serialize;

use percentes_formats::schedule::RATE_RPS_MAX;

use crate::model::{Distribution, Report};

/// The most rates one sweep records.
pub const RATES_MAX: usize = 64;

/// Why `--rates` was refused; each kind holds the text it refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RatesError {
    /// A part is not a number.
    NotANumber {
        /// The part.
        part: String,
    },
    /// A rate at or below 0, or above [`RATE_RPS_MAX`].
    OutOfRange {
        /// The part.
        part: String,
    },
    /// A ramp without its `*FACTOR`.
    RampWithoutFactor {
        /// The whole flag.
        text: String,
    },
    /// A ramp whose TO is below its FROM, or whose FACTOR is not above 1.
    RampGoesNowhere {
        /// The whole flag.
        text: String,
    },
    /// No rate, or more than [`RATES_MAX`].
    Count {
        /// The whole flag.
        text: String,
    },
    /// A rate not above the one before it.
    NotIncreasing {
        /// The whole flag.
        text: String,
    },
}

impl std::fmt::Display for RatesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RatesError::NotANumber { part } => write!(f, "{part:?} is not a number"),
            RatesError::OutOfRange { part } => {
                write!(f, "{part} is not a rate above 0 and at most {RATE_RPS_MAX}")
            }
            RatesError::RampWithoutFactor { text } => {
                write!(f, "{text:?}: a ramp is FROM..TO*FACTOR, such as 2..32*2")
            }
            RatesError::RampGoesNowhere { text } => {
                write!(f, "{text:?}: a ramp needs FROM <= TO and a FACTOR above 1")
            }
            RatesError::Count { text } => {
                write!(f, "{text:?}: between 1 and {RATES_MAX} rates")
            }
            RatesError::NotIncreasing { text } => write!(f, "{text:?}: the rates must increase"),
        }
    }
}

impl std::error::Error for RatesError {}

/// `2,4,8,16`, or a geometric ramp `FROM..TO*FACTOR` (`2..32*2` is 2, 4, 8, 16, 32): rates in
/// requests per second, each above 0, strictly increasing.
pub fn parse_rates(text: &str) -> Result<Vec<f64>, RatesError> {
    let number = |s: &str| -> Result<f64, RatesError> {
        let part = s.to_owned();
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| RatesError::NotANumber { part: part.clone() })?;
        if v.is_finite() && v > 0.0 && v <= RATE_RPS_MAX {
            Ok(v)
        } else {
            Err(RatesError::OutOfRange { part })
        }
    };
    let whole = || text.to_owned();
    let rates: Vec<f64> = if let Some((from, rest)) = text.split_once("..") {
        let (to, factor) = rest
            .split_once('*')
            .ok_or_else(|| RatesError::RampWithoutFactor { text: whole() })?;
        let (from, to, factor) = (number(from)?, number(to)?, number(factor)?);
        if factor <= 1.0 || to < from {
            return Err(RatesError::RampGoesNowhere { text: whole() });
        }
        let mut rates = Vec::new();
        let mut rate = from;
        // Compared in millionths of a request per second, so 2..32*2 ends at 32 whatever the
        // products round to.
        let micro = |r: f64| (r * 1e6).round();
        while micro(rate) <= micro(to) && rates.len() <= RATES_MAX {
            rates.push(micro(rate) / 1e6);
            rate *= factor;
        }
        rates
    } else {
        text.split(',').map(number).collect::<Result<_, _>>()?
    };
    if rates.is_empty() || rates.len() > RATES_MAX {
        return Err(RatesError::Count { text: whole() });
    }
    if rates.windows(2).any(|w| w[1] <= w[0]) {
        return Err(RatesError::NotIncreasing { text: whole() });
    }
    Ok(rates)
}

/// `--rates` as the command line reads it ([`parse_rates`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Rates(pub Vec<f64>);

impl std::str::FromStr for Rates {
    type Err = RatesError;

    fn from_str(text: &str) -> Result<Rates, RatesError> {
        parse_rates(text).map(Rates)
    }
}

/// The sweep schema this build writes.
pub const SWEEP_SCHEMA: &str = "percentes-sweep/1";

/// The whole sweep, written as sweep.json.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    /// [`SWEEP_SCHEMA`].
    pub schema: &'static str,
    /// The configuration the rates were applied to.
    pub config: String,
    /// Why it may not be published, each line starting `NOT PUBLISHABLE` (the dev profile, rates
    /// shown for diagnosis); empty when it may.
    pub not_publishable: Vec<String>,
    /// One point per rate, in the order swept.
    pub points: Vec<Point>,
    /// Under spec v0.5, where the configuration declares an SLO (SPEC §4 "A declared SLO"):
    /// the highest rate at which it kept its goodput target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_under_your_slo: Option<SloCapacity>,
}

/// The capacity under the user's declared SLO: the highest swept rate whose recording is valid
/// and whose declared goodput reached the SLO's target (SPEC §4 "A declared SLO").
#[derive(Clone, Debug, Serialize)]
pub struct SloCapacity {
    /// The declared SLO, as the configuration declares it.
    pub slo: String,
    /// The goodput target a rate must reach, a share.
    pub target: f64,
    /// The highest rate that reached it, rps; `None` where no valid rate did.
    pub rate_rps: Option<f64>,
    /// That rate's declared goodput and its 95 % interval.
    pub goodput: Option<f64>,
    /// See `goodput`.
    pub interval: Option<(f64, f64)>,
    /// The reading in words: the rate, its goodput and interval, the next rate's, and what
    /// the sweep cannot say.
    pub text: String,
}

/// The measurement window's goodput under the declared SLO (A4), with its interval.
#[derive(Clone, Debug, Serialize)]
pub struct DeclaredPoint {
    /// The share of scheduled requests that met it.
    pub goodput: Option<f64>,
    /// Its 95 % interval.
    pub interval: Option<(f64, f64)>,
}

/// One offered rate.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// The offered rate, requests per second (`schedule.rate_rps` of its recording).
    pub rate_rps: f64,
    /// The journal the point is read from.
    pub journal: String,
    /// Earlier recordings of this rate that only the client gate failed (recorded again).
    pub spoiled: Vec<String>,
    /// Whether every run-invalidating gate held.
    pub valid: bool,
    /// The gates that did not, `ID status (observed)`.
    pub failed_gates: Vec<String>,
    /// Requests scheduled in the measurement window.
    pub scheduled: u64,
    /// Completed requests per second of the measurement window.
    pub throughput_rps: Option<f64>,
    /// Errored share of the window's scheduled requests.
    pub error_rate: Option<f64>,
    /// Censored share (no answer within the client timeout).
    pub censored_rate: Option<f64>,
    /// SLO-goodput under the pinned SLO (§4).
    pub goodput: Option<f64>,
    /// Under v0.5, goodput under the configuration's declared SLO (§4 "A declared SLO").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared: Option<DeclaredPoint>,
    /// TTFT, TPOT and end-to-end latency, completed requests only.
    pub latency: Vec<Latency>,
    /// The completion curve's quantile readings over every scheduled request (§3), each a
    /// value or its refusal (a p99 the censored and errored mass makes unattainable).
    pub completion: Vec<String>,
}

/// p50 and p99 of one latency at one rate.
#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// `ttft`, `tpot` or `e2e`.
    pub metric: &'static str,
    /// Samples.
    pub n: u64,
    /// From the pinned histogram, us.
    pub p50_us: Option<u64>,
    /// From the pinned histogram, us.
    pub p99_us: Option<u64>,
    /// The p99's 95 % order-statistic interval, us, when the sample supports one (§7).
    pub p99_interval_us: Option<(u64, u64)>,
    /// The interval, or why the sample supports none, in words.
    pub p99_text: String,
}

/// The metrics a point reports, in order.
pub const METRICS: [&str; 3] = ["ttft", "tpot", "e2e"];

impl Point {
    /// The point of one rate's report: its measurement window, or nothing but the failed gates
    /// when the run is invalid (its report publishes no statistic, §9).
    pub fn of(rate_rps: f64, journal: &str, spoiled: Vec<String>, report: &Report) -> Point {
        let failed_gates: Vec<String> = report
            .validity
            .failed()
            .map(|g| format!("{} {} ({})", g.id, g.status, g.observed))
            .collect();
        let window = report.windows.iter().find(|w| w.window == "measurement");
        let latency = window.map_or_else(Vec::new, |w| {
            [
                (METRICS[0], &w.ttft),
                (METRICS[1], &w.tokens.tpot),
                (METRICS[2], &w.e2e),
            ]
            .into_iter()
            .map(|(metric, d)| latency(metric, d))
            .collect()
        });
        Point {
            rate_rps,
            journal: journal.to_owned(),
            spoiled,
            valid: report.validity.valid,
            failed_gates,
            scheduled: report
                .timeline
                .windows
                .iter()
                .find(|w| w.window == "measurement")
                .map_or(0, |w| w.scheduled),
            throughput_rps: window.and_then(|w| w.throughput_rps.value),
            error_rate: window.and_then(|w| w.error_rate.value),
            censored_rate: window.and_then(|w| w.censored_rate.value),
            goodput: window.and_then(|w| w.goodput.value),
            declared: window
                .and_then(|w| w.declared_goodput.as_ref())
                .map(|d| DeclaredPoint {
                    goodput: d.goodput.value,
                    interval: d.interval.interval,
                }),
            latency,
            completion: window.map_or_else(Vec::new, |w| {
                w.completion
                    .readings
                    .iter()
                    .map(|r| r.text.clone())
                    .collect()
            }),
        }
    }

    fn metric(&self, metric: &str) -> Option<&Latency> {
        self.latency.iter().find(|l| l.metric == metric)
    }
}

/// One recording at one offered rate, as the capacity under a declared SLO reads it: a sweep's
/// point, or a calibration's step.
#[derive(Clone, Copy, Debug)]
pub struct Rated<'a> {
    /// The offered rate, rps.
    pub rate_rps: f64,
    /// Whether the recording may be read (its gates held).
    pub valid: bool,
    /// Its measurement window's declared goodput.
    pub declared: Option<&'a DeclaredPoint>,
}

impl<'a> From<&'a Point> for Rated<'a> {
    fn from(p: &'a Point) -> Rated<'a> {
        Rated {
            rate_rps: p.rate_rps,
            valid: p.valid,
            declared: p.declared.as_ref(),
        }
    }
}

/// The capacity under a declared SLO (`slo` its text, `target` its goodput target) from a
/// sweep's points or a calibration's steps; `None` where none carries a declared goodput (no
/// declared SLO, or an analysis under v0.1-v0.4).
pub fn capacity_under_slo(points: &[Rated<'_>], slo: &str, target: f64) -> Option<SloCapacity> {
    if points.iter().all(|p| p.declared.is_none()) {
        return None;
    }
    let percent = |v: f64| format!("{:.2} %", v * 100.0);
    let kept = |p: &Rated<'_>| {
        p.valid
            && p.declared
                .and_then(|d| d.goodput)
                .is_some_and(|g| g >= target)
    };
    let goodput_of = |p: &Rated<'_>| p.declared.and_then(|d| d.goodput);
    let interval_of = |p: &Rated<'_>| p.declared.and_then(|d| d.interval);
    let best = points
        .iter()
        .filter(|p| kept(p))
        .max_by(|a, b| a.rate_rps.total_cmp(&b.rate_rps));
    let mut text = match best {
        None => format!(
            "no valid rate kept {} of its requests within your SLO ({slo})",
            percent(target)
        ),
        Some(p) => {
            let mut t = format!(
                "{} rps: the highest swept rate at which {} of the requests met your SLO ({slo}); it kept {}",
                p.rate_rps,
                percent(target),
                goodput_of(p).map_or_else(|| "n/a".into(), percent)
            );
            if let Some((lo, hi)) = interval_of(p) {
                let _ = write!(t, " (95 % CI {}-{})", percent(lo), percent(hi));
                if lo < target {
                    t.push_str(", an interval that reaches below the target: a longer run could place the capacity lower");
                }
            }
            t
        }
    };
    neighbours(&mut text, points, best, &kept);
    Some(SloCapacity {
        slo: slo.to_owned(),
        target,
        rate_rps: best.map(|p| p.rate_rps),
        goodput: best.and_then(goodput_of),
        interval: best.and_then(interval_of),
        text,
    })
}

/// What the rates around the capacity say: the next rate's goodput (or that it is invalid, or
/// that none was swept), and the lower rates that did not keep the target.
fn neighbours(
    text: &mut String,
    points: &[Rated<'_>],
    best: Option<&Rated<'_>>,
    kept: &dyn Fn(&Rated<'_>) -> bool,
) {
    let percent = |v: f64| format!("{:.2} %", v * 100.0);
    let goodput_of = |p: &Rated<'_>| p.declared.and_then(|d| d.goodput);
    let above = points
        .iter()
        .filter(|p| best.is_none_or(|b| p.rate_rps > b.rate_rps))
        .min_by(|a, b| a.rate_rps.total_cmp(&b.rate_rps));
    match above {
        Some(p) if !p.valid => {
            let _ = write!(text, "; the next rate, {} rps, is invalid (its gates), so the capacity may lie above or below it", p.rate_rps);
        }
        Some(p) => {
            let _ = write!(
                text,
                "; the next rate, {} rps, kept {}",
                p.rate_rps,
                goodput_of(p).map_or_else(|| "n/a".into(), percent)
            );
        }
        None if best.is_some() => {
            text.push_str("; no higher rate was swept, so the capacity may lie higher")
        }
        None => {}
    }
    let below: Vec<String> = points
        .iter()
        .filter(|p| best.is_some_and(|b| p.rate_rps < b.rate_rps) && !kept(p))
        .map(|p| format!("{} rps", p.rate_rps))
        .collect();
    if !below.is_empty() {
        let _ = write!(
            text,
            "; lower rates did not keep it ({}): the goodput is not monotone in the rate, read the table",
            below.join(", ")
        );
    }
}

fn latency(metric: &'static str, d: &Distribution) -> Latency {
    let at = |q: &str| {
        d.percentiles_us
            .iter()
            .find(|(n, _)| n == q)
            .map(|(_, v)| *v)
    };
    let tail = d.tails.iter().find(|t| t.quantile == "p99");
    Latency {
        metric,
        n: d.n,
        p50_us: at("p50"),
        p99_us: at("p99"),
        p99_interval_us: tail.and_then(|t| t.interval_us),
        p99_text: tail.map_or_else(|| "no samples".to_owned(), |t| t.text.clone()),
    }
}

/// sweep.json.
pub fn json(sweep: &Sweep) -> String {
    let mut text = serde_json::to_string_pretty(sweep).expect("a sweep serializes");
    text.push('\n');
    text
}

/// sweep.md: the table, then each point's p99 reading in words.
pub fn markdown(sweep: &Sweep) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Load sweep: latency against offered load\n");
    let _ = writeln!(md, "Configuration: `{}`\n", sweep.config);
    for why in &sweep.not_publishable {
        let _ = writeln!(md, "**{why}**\n");
    }
    let _ = writeln!(
        md,
        "Each rate is its own recording, analyzed as `percentes analyze` would: the measurement window, completed requests only for the latencies (p99 with its 95 % order-statistic interval where the sample supports one, refused where it does not, as everywhere else: a tail is never a bare point, §7), the completion curve over every scheduled request below. A recording that failed a gate publishes nothing for its rate (§9).\n"
    );
    if let Some(c) = &sweep.capacity_under_your_slo {
        let _ = writeln!(md, "**Capacity under your SLO**: {}.\n", c.text);
    }
    let _ = writeln!(
        md,
        "| offered rps | scheduled | throughput rps | errored | censored | {} | TTFT p50 / p99 ms | TPOT p50 / p99 ms | e2e p50 / p99 ms | gates |\n|---|---|---|---|---|---|---|---|---|---|",
        if sweep.capacity_under_your_slo.is_some() {
            "goodput, pinned SLO / yours"
        } else {
            "goodput"
        }
    );
    let share = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.4}"));
    // A4: beside the pinned SLO's goodput, the declared one's where the sweep has one.
    let goodputs = |p: &Point| match &p.declared {
        Some(d) => format!("{} / {}", share(p.goodput), share(d.goodput)),
        None => share(p.goodput),
    };
    for p in &sweep.points {
        let cell = |metric: &str| match p.metric(metric) {
            // A p99 without its interval is refused, as the terminal, the card and the
            // thresholds refuse it (issue 54 item 1: "900.0 (no CI)" at n = 12).
            Some(l) if l.n > 0 => match l.p99_interval_us {
                Some((a, b)) => format!(
                    "{} / {} [{}, {}]",
                    ms(l.p50_us),
                    ms(l.p99_us),
                    ms(Some(a)),
                    ms(Some(b))
                ),
                None => format!("{} / refused", ms(l.p50_us)),
            },
            Some(_) => "no samples".into(),
            None => "withheld".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.rate_rps,
            p.scheduled,
            p.throughput_rps
                .map_or("n/a".to_owned(), |v| format!("{v:.2}")),
            share(p.error_rate),
            share(p.censored_rate),
            goodputs(p),
            cell("ttft"),
            cell("tpot"),
            cell("e2e"),
            match (p.valid, p.latency.is_empty()) {
                (true, _) => "pass".to_owned(),
                (false, true) => format!("INVALID: {}", p.failed_gates.join(", ")),
                (false, false) => format!(
                    "INVALID, shown for diagnosis only: {}",
                    p.failed_gates.join(", ")
                ),
            }
        );
    }
    let _ = writeln!(md, "\n## Readings\n");
    for p in &sweep.points {
        if p.latency.is_empty() {
            let _ = writeln!(
                md,
                "- {} rps (`{}`): no statistic published; the run is invalid",
                p.rate_rps, p.journal
            );
            continue;
        }
        let _ = writeln!(
            md,
            "- {} rps completion curve: {}",
            p.rate_rps,
            p.completion.join("; ")
        );
        for l in &p.latency {
            let _ = writeln!(
                md,
                "- {} rps {}: {} (n = {})",
                p.rate_rps, l.metric, l.p99_text, l.n
            );
        }
        if let Some(d) = &p.declared {
            let _ = writeln!(
                md,
                "- {} rps goodput under your SLO: {}{}",
                p.rate_rps,
                share(d.goodput),
                d.interval
                    .map(|(lo, hi)| format!(" (95 % CI {lo:.4}-{hi:.4})"))
                    .unwrap_or_default()
            );
        }
        if !p.spoiled.is_empty() {
            let _ = writeln!(
                md,
                "- {} rps: recorded again after {} (the client gate alone failed)",
                p.rate_rps,
                p.spoiled.join(", ")
            );
        }
    }
    md
}

fn ms(us: Option<u64>) -> String {
    us.map_or("n/a".to_owned(), |v| format!("{:.1}", v as f64 / 1e3))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-made points: a declared goodput of 1.00, 0.97, 0.99 (interval 0.975-0.996) and
    /// 0.80 at 2, 4, 8 and 16 rps against a 99 % target. The capacity is 8 rps (the highest
    /// that kept it), its interval reaches below the target, the next rate kept 80 %, and 4 rps
    /// below it did not: the goodput is not monotone, and the reading says so.
    #[test]
    fn capacity_under_a_declared_slo_by_hand() {
        let with = |rate: f64, g: f64, ci: (f64, f64)| Point {
            declared: Some(DeclaredPoint {
                goodput: Some(g),
                interval: Some(ci),
            }),
            ..point(rate, true, 1000, 2000, None)
        };
        let points = vec![
            with(2.0, 1.0, (0.96, 1.0)),
            with(4.0, 0.97, (0.94, 0.99)),
            with(8.0, 0.99, (0.975, 0.996)),
            with(16.0, 0.80, (0.75, 0.85)),
        ];
        fn rated(points: &[Point]) -> Vec<Rated<'_>> {
            points.iter().map(Rated::from).collect()
        }
        let c = capacity_under_slo(&rated(&points), "ttft<=500ms", 0.99).unwrap();
        assert_eq!((c.rate_rps, c.goodput), (Some(8.0), Some(0.99)));
        assert_eq!(c.interval, Some((0.975, 0.996)));
        for part in [
            "8 rps: the highest swept rate at which 99.00 % of the requests met your SLO (ttft<=500ms)",
            "(95 % CI 97.50 %-99.60 %), an interval that reaches below the target",
            "the next rate, 16 rps, kept 80.00 %",
            "lower rates did not keep it (4 rps)",
        ] {
            assert!(c.text.contains(part), "{part}: {}", c.text);
        }
        // An invalid rate never counts, however good its goodput.
        let mut invalid = with(32.0, 1.0, (0.99, 1.0));
        invalid.valid = false;
        let two = [with(2.0, 0.995, (0.991, 0.999)), invalid];
        let c = capacity_under_slo(&rated(&two), "e2e<=2s", 0.99).unwrap();
        assert_eq!(c.rate_rps, Some(2.0));
        assert!(
            c.text.contains("the next rate, 32 rps, is invalid"),
            "{}",
            c.text
        );
        assert!(!c.text.contains("reaches below"), "{}", c.text);
        // None kept it; and a sweep with no declared goodput has no such reading.
        let c =
            capacity_under_slo(&rated(&[with(2.0, 0.5, (0.4, 0.6))]), "ttft<=1ms", 0.99).unwrap();
        assert_eq!(c.rate_rps, None);
        assert!(
            c.text.starts_with("no valid rate kept 99.00 %"),
            "{}",
            c.text
        );
        assert!(capacity_under_slo(&rated(&[point(2.0, true, 1, 2, None)]), "x", 0.99).is_none());
        // The top rate kept it: the capacity may lie higher.
        let c =
            capacity_under_slo(&rated(&[with(2.0, 1.0, (0.99, 1.0))]), "ttft<=1s", 0.99).unwrap();
        assert!(c.text.contains("no higher rate was swept"), "{}", c.text);
    }

    fn point(rate: f64, valid: bool, p50: u64, p99: u64, ci: Option<(u64, u64)>) -> Point {
        Point {
            rate_rps: rate,
            journal: format!("sweep-{rate}rps.pj"),
            spoiled: Vec::new(),
            valid,
            failed_gates: if valid {
                Vec::new()
            } else {
                vec!["G2.4 fail (1140.000 us)".into()]
            },
            scheduled: 100,
            throughput_rps: valid.then_some(rate),
            error_rate: valid.then_some(0.0),
            censored_rate: valid.then_some(0.01),
            goodput: valid.then_some(0.99),
            declared: None,
            latency: if valid {
                METRICS
                    .iter()
                    .map(|&metric| Latency {
                        metric,
                        n: 100,
                        p50_us: Some(p50),
                        p99_us: Some(p99),
                        p99_interval_us: ci,
                        p99_text: if ci.is_some() {
                            "p99 = ... 95 % CI".into()
                        } else {
                            "p99 omitted".into()
                        },
                    })
                    .collect()
            } else {
                Vec::new()
            },
            completion: if valid {
                vec!["p50 = 0.210 s".into(), "p99 unattainable".into()]
            } else {
                Vec::new()
            },
        }
    }

    #[test]
    fn the_table_keeps_each_rates_refusals_and_invalid_runs_publish_nothing() {
        let sweep = Sweep {
            schema: SWEEP_SCHEMA,
            config: "run.toml".into(),
            not_publishable: Vec::new(),
            capacity_under_your_slo: None,
            points: vec![
                point(2.0, true, 210_000, 219_800, Some((219_000, 220_000))),
                point(4.0, true, 250_000, 900_000, None),
                point(8.0, false, 0, 0, None),
                Point {
                    valid: false,
                    failed_gates: vec!["G2.4 fail (1560.000 us)".into()],
                    ..point(16.0, true, 260_000, 300_000, None)
                },
            ],
        };
        let md = markdown(&sweep);
        assert!(
            md.contains(
                "| 2 | 100 | 2.00 | 0.0000 | 0.0100 | 0.9900 | 210.0 / 219.8 [219.0, 220.0] |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 4 | 100 | 4.00 | 0.0000 | 0.0100 | 0.9900 | 250.0 / refused |"),
            "{md}"
        );
        assert!(
            md.contains("- 4 rps completion curve: p50 = 0.210 s; p99 unattainable"),
            "{md}"
        );
        assert!(md.contains("| 8 | 100 | n/a | n/a | n/a | n/a | withheld | withheld | withheld | INVALID: G2.4 fail (1140.000 us) |"), "{md}");
        assert!(
            md.contains("- 8 rps (`sweep-8rps.pj`): no statistic published"),
            "{md}"
        );
        // Asked for a diagnosis, an invalid rate's numbers show, and its row says what they are.
        assert!(
            md.contains("| 16 | 100 | 16.00 | 0.0000 | 0.0100 | 0.9900 | 260.0 / refused |"),
            "{md}"
        );
        assert!(
            md.contains("| INVALID, shown for diagnosis only: G2.4 fail (1560.000 us) |"),
            "{md}"
        );
        let svg = crate::plots::sweep_latency(&sweep);
        assert!(
            svg.contains("invalid: nothing published") && svg.contains("invalid: diagnosis only")
        );
        // Issue 54 item 4: a dot at each measured rate, and the p99's dashed line has a dashed
        // swatch (one per metric with a p99 drawn).
        assert!(svg.matches("<circle ").count() >= 4, "{svg}");
        let swatches = svg
            .lines()
            .filter(|l| l.contains("stroke-width=\"3\" stroke-dasharray"))
            .count();
        assert!(swatches >= 1, "{svg}");
        // TPOT and e2e a thousand times apart each read: the y axis is logarithmic, by decades.
        assert!(
            svg.contains("latency (log scale)") && svg.contains(">100 ms<"),
            "{svg}"
        );
        // Latency against throughput achieved: the valid rates only, a dot at each for TTFT
        // and for e2e.
        let tradeoff = crate::plots::sweep_tradeoff(&sweep);
        assert!(
            tradeoff.contains("ttft p50") && tradeoff.contains("e2e p50"),
            "{tradeoff}"
        );
        let valid = sweep.points.iter().filter(|p| p.valid).count();
        assert_eq!(
            tradeoff.matches("<circle ").count(),
            2 * valid,
            "{tradeoff}"
        );
        let json: serde_json::Value = serde_json::from_str(&json(&sweep)).unwrap();
        assert_eq!(json["schema"], SWEEP_SCHEMA);
        assert_eq!(
            json["points"][1]["latency"][0]["p99_interval_us"],
            serde_json::Value::Null
        );
        assert_eq!(
            json["points"][0]["latency"][2]["p99_interval_us"][1],
            220_000
        );
    }

    #[test]
    fn rates_are_a_list_or_a_geometric_ramp_and_nonsense_is_refused() {
        assert_eq!(parse_rates("2,4,8,16").unwrap(), [2.0, 4.0, 8.0, 16.0]);
        assert_eq!(parse_rates("2..32*2").unwrap(), [2.0, 4.0, 8.0, 16.0, 32.0]);
        assert_eq!(parse_rates("1..2*1.5").unwrap(), [1.0, 1.5]);
        assert_eq!(parse_rates("0.5").unwrap(), [0.5]);
        let part = |p: &str| p.to_owned();
        let text = |t: &str| t.to_owned();
        for (bad, kind, why) in [
            (
                "",
                RatesError::NotANumber { part: part("") },
                "is not a number",
            ),
            (
                "2,x",
                RatesError::NotANumber { part: part("x") },
                "is not a number",
            ),
            (
                "4,2",
                RatesError::NotIncreasing { text: text("4,2") },
                "must increase",
            ),
            (
                "2,2",
                RatesError::NotIncreasing { text: text("2,2") },
                "must increase",
            ),
            ("0,1", RatesError::OutOfRange { part: part("0") }, "above 0"),
            ("-1", RatesError::OutOfRange { part: part("-1") }, "above 0"),
            (
                "2..32",
                RatesError::RampWithoutFactor {
                    text: text("2..32"),
                },
                "FROM..TO*FACTOR",
            ),
            (
                "2..32*1",
                RatesError::RampGoesNowhere {
                    text: text("2..32*1"),
                },
                "FACTOR above 1",
            ),
            (
                "32..2*2",
                RatesError::RampGoesNowhere {
                    text: text("32..2*2"),
                },
                "FROM <= TO",
            ),
            (
                "1..1000000*1.01",
                RatesError::Count {
                    text: text("1..1000000*1.01"),
                },
                "between 1 and 64 rates",
            ),
        ] {
            let e = parse_rates(bad).unwrap_err();
            assert_eq!(e, kind, "{bad}");
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_sweep_plots_axis_ends_on_a_round_number() {
        use crate::plots::round_up;
        assert_eq!(round_up(40.4), 50.0);
        assert_eq!(round_up(9.3), 10.0);
        assert_eq!(round_up(10.0), 10.0);
        assert_eq!(round_up(0.37), 0.5);
        assert_eq!(round_up(1234.0), 1250.0);
        assert_eq!(round_up(0.0), 1.0);
    }
}
