//! Every number the specification pins, in one table, each with its clause.
//!
//! Configuration loading ([`crate::config`]) checks every keyed pin; SPEC.md's pin table is
//! rendered from [`PINS`] by [`markdown_table`] and a test keeps the two identical. Code that needs
//! a pinned number reads it from here (through the constants below or [`pin`]), never from a
//! literal of its own.

use std::fmt;

/// How a configured value may relate to the pinned one without weakening it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Any other value changes what is measured: it must equal the pin.
    Exactly,
    /// An upper limit (a gate threshold): a smaller value is stricter and allowed.
    AtMost,
    /// A lower limit (a floor): a larger value is stricter and allowed.
    AtLeast,
}

/// Who can make a pin true. Under the `hosted` profile, server-side pins are "not verifiable".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The recorder enforces it on its own traffic.
    Client,
    /// Only the operator of the serving stack can make it true.
    Server,
    /// Applied by the analyzer to the journal.
    Analysis,
}

/// A pinned value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v:?}"),
            Value::Bool(v) => write!(f, "{v}"),
        }
    }
}

impl Value {
    /// The value as f64 for ordered comparison (booleans are never compared by order).
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(v as f64),
            Value::Float(v) => Some(v),
            Value::Bool(_) => None,
        }
    }
}

/// One pinned number.
#[derive(Clone, Copy, Debug)]
pub struct Pin {
    /// Dotted TOML key that may set it, or `None` where no configuration can express it.
    pub key: Option<&'static str>,
    /// The SPEC.md clause that fixes it.
    pub clause: &'static str,
    /// What it is, in a few words.
    pub what: &'static str,
    pub value: Value,
    pub unit: &'static str,
    pub rule: Rule,
    pub side: Side,
    /// Whether the dev profile's time factor divides it (timeline durations only).
    pub dev_scaled: bool,
}

macro_rules! pins {
    ($( $key:expr, $clause:expr, $what:expr, $value:expr, $unit:expr, $rule:ident, $side:ident, $scaled:expr; )*) => {
        /// The pin table. Order is SPEC.md's order.
        pub const PINS: &[Pin] = &[$(Pin {
            key: $key, clause: $clause, what: $what, value: $value, unit: $unit,
            rule: Rule::$rule, side: Side::$side, dev_scaled: $scaled,
        },)*];
    };
}

use Value::{Float, Int};

pins! {
    Some("experiment.warmup_s"), "§1", "warm-up phase (discarded)", Int(60), "s", Exactly, Client, true;
    Some("experiment.baseline_s"), "§1", "baseline phase", Int(300), "s", Exactly, Client, true;
    Some("experiment.recovery_timeout_s"), "§1", "degradation-and-recovery window (recovery timeout)", Int(600), "s", Exactly, Client, true;
    Some("experiment.cooldown_s"), "§1", "cooldown phase", Int(60), "s", Exactly, Client, true;
    Some("calibration.lambda_r_fraction"), "§1", "per-replica load as a fraction of lambda_max", Float(0.65), "", Exactly, Client, false;
    Some("target.max_tokens"), "§1", "max_tokens on every request", Int(256), "tokens", Exactly, Client, false;
    Some("fault.partition_s"), "§1", "black-hole partition duration (expiry armed before firing)", Int(120), "s", Exactly, Server, true;
    None, "§1", "black-hole: minimum dead-endpoint staleness with victim-bound traffic (G4)", Int(20), "s", AtLeast, Server, true;
    None, "§1", "black-hole: recorded node-monitor grace period that fails the run", Int(120), "s", Exactly, Server, false;
    Some("gates.replica_share_min_percent"), "§1", "G1: minimum share of baseline requests per replica", Int(45), "%", AtLeast, Server, false;
    Some("gates.replica_share_max_percent"), "§1", "G1: maximum share of baseline requests per replica", Int(55), "%", AtMost, Server, false;
    Some("client.connections_floor_per_replica"), "§1", "connection pool floor per replica", Int(4), "connections", AtLeast, Client, false;
    Some("client.retries"), "§1", "retries", Int(0), "", Exactly, Client, false;
    Some("gates.send_skew_p99_ms"), "§2", "send skew p99 (actual minus intended dispatch)", Int(5), "ms", AtMost, Client, false;
    Some("gates.send_skew_max_ms"), "§2", "send skew max", Int(50), "ms", AtMost, Client, false;
    Some("gates.undispatched_max"), "§2", "scheduled but never dispatched requests", Int(0), "requests", AtMost, Client, false;
    Some("gates.host_cpu_max_percent"), "§2", "host CPU over any window", Int(70), "%", AtMost, Client, false;
    Some("gates.host_cpu_window_s"), "§2", "host CPU window", Int(5), "s", Exactly, Client, false;
    Some("gates.runtime_stall_p99_us"), "§2", "runtime stall p99, strictly below (ticker lateness)", Int(1000), "us", AtMost, Client, false;
    Some("client.timeout_s"), "§3", "client timeout (censoring horizon)", Int(30), "s", Exactly, Client, true;
    Some("analysis.crossing_tolerance"), "§3", "quantile crossing test, absolute tolerance", Float(1e-9), "", Exactly, Analysis, false;
    Some("analysis.conditional_caveat_fraction"), "§3", "errored+censored fraction above which the curve accompanies completed-only percentiles", Float(0.05), "", AtMost, Analysis, false;
    Some("analysis.intertoken_floor_us"), "§3", "smallest recorded inter-chunk gap", Int(1), "us", Exactly, Client, false;
    Some("analysis.histogram_lowest_us"), "§3", "histogram lowest discernible value", Int(1), "us", Exactly, Analysis, false;
    Some("analysis.histogram_highest_us"), "§3", "histogram highest trackable value", Int(600_000_000), "us", Exactly, Analysis, false;
    Some("analysis.histogram_significant_figures"), "§3", "histogram significant figures", Int(3), "", Exactly, Analysis, false;
    None, "§3", "completion re-based to t_i may exceed the horizon by at most", Int(50), "ms", AtMost, Analysis, false;
    Some("slo.ttft_ms"), "§4", "SLO: time to first token", Int(1000), "ms", Exactly, Analysis, false;
    Some("slo.e2e_ms"), "§4", "SLO: end-to-end latency", Int(14_000), "ms", Exactly, Analysis, false;
    Some("gates.baseline_goodput_min"), "§4", "G6: baseline goodput", Float(0.99), "", AtLeast, Analysis, false;
    None, "§4", "SLO sweep: TTFT thresholds 800, 1000, 1500", Int(3), "values", Exactly, Analysis, false;
    None, "§4", "SLO sweep: e2e thresholds 12, 14, 18 s", Int(3), "values", Exactly, Analysis, false;
    None, "§4", "modal latency: bin width as a fraction of the window median", Float(0.01), "", Exactly, Analysis, false;
    None, "§4", "modal latency: bin width floor", Int(1), "ms", Exactly, Analysis, false;
    Some("recovery.window_s"), "§5", "detector sliding window R", Int(10), "s", Exactly, Analysis, true;
    Some("recovery.entry_percent"), "§5", "detector entry, % of the baseline's goodput", Int(90), "%", Exactly, Analysis, false;
    Some("recovery.exit_percent"), "§5", "detector exit, % of the baseline's goodput", Int(85), "%", Exactly, Analysis, false;
    Some("recovery.hold_s"), "§5", "detector hold H", Int(30), "s", Exactly, Analysis, true;
    Some("recovery.bucket_s"), "§5", "goodput bucket", Int(1), "s", Exactly, Analysis, true;
    None, "§5", "sensitivity sweep cells (X 85/90/95 x R 5/10/20 x H 15/30/60)", Int(27), "cells", Exactly, Analysis, false;
    Some("campaign.runs"), "§5", "runs per (variant, config)", Int(5), "runs", Exactly, Analysis, false;
    Some("schema_version"), "§6", "configuration schema version", Int(1), "", Exactly, Client, false;
    Some("statistics.confidence_percent"), "§7", "interval confidence level", Int(95), "%", Exactly, Analysis, false;
    None, "§7", "t quantile for run-level intervals (df = 4)", Float(2.776), "", Exactly, Analysis, false;
    None, "§7", "smallest completed sample with a p95 interval", Int(73), "requests", Exactly, Analysis, false;
    None, "§7", "smallest completed sample with a p99 interval", Int(381), "requests", Exactly, Analysis, false;
    Some("calibration.start_rps"), "§10", "calibration coarse ramp start (doubling)", Int(2), "rps", Exactly, Client, false;
    Some("calibration.fine_step_percent"), "§10", "calibration fine step", Int(10), "%", Exactly, Client, false;
    Some("calibration.settle_s"), "§10", "calibration step settle", Int(30), "s", Exactly, Client, true;
    Some("calibration.measure_s"), "§10", "calibration step measured", Int(120), "s", Exactly, Client, true;
    Some("calibration.step_goodput_min"), "§10", "calibration step passes at goodput", Float(0.99), "", AtLeast, Client, false;
    Some("calibration.step_waiting_max"), "§10", "calibration step passes at mean waiting-queue gauge", Float(1.0), "", AtMost, Server, false;
    Some("calibration.disagreement_percent"), "§10", "two calibrations disagreeing by more than this need a third", Int(10), "%", AtMost, Client, false;
    Some("gates.waiting_queue_max"), "§10", "G7: baseline mean waiting-queue gauge per replica", Float(1.0), "", AtMost, Server, false;
}

/// The pin with this config key. Panics if the key is not in the table: a typo in our own code.
pub fn pin(key: &str) -> &'static Pin {
    PINS.iter()
        .find(|p| p.key == Some(key))
        .unwrap_or_else(|| panic!("no pin has the key {key}: fix the caller"))
}

/// The pin with this config key as an integer (for the keyed integer pins).
pub fn int(key: &str) -> i64 {
    match pin(key).value {
        Value::Int(v) => v,
        other => panic!("pin {key} is {other:?}, not an integer: fix the caller"),
    }
}

/// The pin with this config key as a float.
pub fn float(key: &str) -> f64 {
    match pin(key).value {
        Value::Float(v) => v,
        Value::Int(v) => v as f64,
        Value::Bool(_) => panic!("pin {key} is a boolean: fix the caller"),
    }
}

/// Whether `configured` weakens `pin`. Types must already agree (the loader checks that).
pub fn weakens(pin: &Pin, configured: Value) -> bool {
    match (pin.rule, pin.value, configured) {
        (_, Value::Bool(a), Value::Bool(b)) => a != b,
        (Rule::Exactly, a, b) => a.as_f64() != b.as_f64(),
        (Rule::AtMost, a, b) => b.as_f64() > a.as_f64(),
        (Rule::AtLeast, a, b) => b.as_f64() < a.as_f64(),
    }
}

/// The wording of a rule for error messages and the table.
pub fn rule_words(rule: Rule) -> &'static str {
    match rule {
        Rule::Exactly => "exactly",
        Rule::AtMost => "at most",
        Rule::AtLeast => "at least",
    }
}

/// SPEC.md's pin table, rendered from [`PINS`]. `tests/spec_doc.rs` checks SPEC.md holds it verbatim.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| clause | pin | value | rule | config key | side | dev-scaled |\n|---|---|---|---|---|---|---|\n",
    );
    for p in PINS {
        let unit = if p.unit.is_empty() {
            String::new()
        } else {
            format!(" {}", p.unit)
        };
        out.push_str(&format!(
            "| {} | {} | {}{} | {} | {} | {} | {} |\n",
            p.clause,
            p.what,
            p.value,
            unit,
            rule_words(p.rule),
            p.key
                .map(|k| format!("`{k}`"))
                .unwrap_or_else(|| "(not configurable)".into()),
            match p.side {
                Side::Client => "client",
                Side::Server => "server",
                Side::Analysis => "analysis",
            },
            if p.dev_scaled { "yes" } else { "no" },
        ));
    }
    out
}

/// The spec versions this build can apply (SPEC.md §A1).
pub const SPEC_VERSIONS: &[&str] = &["v0.1", "v0.2"];
/// The spec version a new capture is recorded under.
pub const SPEC_VERSION_CURRENT: &str = "v0.2";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique() {
        let mut keys: Vec<_> = PINS.iter().filter_map(|p| p.key).collect();
        keys.sort();
        let before = keys.len();
        keys.dedup();
        assert_eq!(before, keys.len(), "a config key appears twice in PINS");
    }

    #[test]
    fn direction_of_weakening() {
        let skew = pin("gates.send_skew_p99_ms");
        assert!(weakens(skew, Value::Int(6)));
        assert!(!weakens(skew, Value::Int(4)));
        assert!(!weakens(skew, Value::Int(5)));
        let goodput = pin("gates.baseline_goodput_min");
        assert!(weakens(goodput, Value::Float(0.98)));
        assert!(!weakens(goodput, Value::Float(0.995)));
        let timeout = pin("client.timeout_s");
        assert!(weakens(timeout, Value::Int(29)));
        assert!(weakens(timeout, Value::Int(31)));
    }

    #[test]
    fn seven_interval_thresholds_match_the_normal_approximation() {
        // The smallest n whose outward-rounded ranks np -/+ 1.96 sqrt(np(1-p)) lie in 1..=n.
        fn smallest(p: f64) -> i64 {
            (1..100_000)
                .find(|&n| {
                    let nf = n as f64;
                    let half = 1.96 * (nf * p * (1.0 - p)).sqrt();
                    let lo = (nf * p - half).floor();
                    let hi = (nf * p + half).ceil();
                    lo >= 1.0 && hi <= nf
                })
                .unwrap()
        }
        let p95 = PINS
            .iter()
            .find(|p| p.what.contains("p95 interval"))
            .unwrap();
        let p99 = PINS
            .iter()
            .find(|p| p.what.contains("p99 interval"))
            .unwrap();
        assert_eq!(p95.value, Value::Int(smallest(0.95)));
        assert_eq!(p99.value, Value::Int(smallest(0.99)));
        assert_eq!(smallest(0.999), 3838);
    }
}
