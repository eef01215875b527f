//! Every number the specification pins, in one table, each with its clause.
//!
//! Configuration loading ([`crate::config`]) checks every keyed pin; SPEC.md's pin table is
//! rendered from [`PINS`] by [`markdown_table`] and a test keeps the two identical. Code that needs
//! a pinned number reads it from here (through the named constants and [`value`]), never from a
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
    /// A whole number.
    Int(i64),
    /// A number with a fraction.
    Float(f64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v:?}"),
        }
    }
}

impl Value {
    /// The value as f64 (every pin is a number).
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Int(v) => v as f64,
            Value::Float(v) => v,
        }
    }
}

/// One pinned number.
#[derive(Clone, Copy, Debug)]
pub struct Pin {
    /// Its stable name: the dotted TOML key where a configuration may set it.
    pub key: &'static str,
    /// Whether a configuration may state it (to the pin, or stricter where the rule allows).
    pub configurable: bool,
    /// The SPEC.md clause that fixes it.
    pub clause: &'static str,
    /// What it is, in a few words.
    pub what: &'static str,
    /// The pinned value.
    pub value: Value,
    /// Its unit (`s`, `ms`, `%`, ...), empty for a ratio.
    pub unit: &'static str,
    /// How a configured value may relate to it.
    pub rule: Rule,
    /// Who can make it true.
    pub side: Side,
    /// Whether the dev profile's time factor divides it (timeline durations only).
    pub dev_scaled: bool,
}

macro_rules! pin_type {
    (Int) => {
        i64
    };
    (Float) => {
        f64
    };
}

macro_rules! pins {
    ($( $name:ident = $key:expr, $configurable:expr, $clause:expr, $what:expr, $kind:ident($value:expr), $unit:expr, $rule:ident, $side:ident, $scaled:expr; )*) => {
        $(
            #[doc = concat!("SPEC ", $clause, ": ", $what, " (`", $key, "`).")]
            pub const $name: Pin = Pin {
                key: $key, configurable: $configurable, clause: $clause, what: $what,
                value: Value::$kind($value), unit: $unit, rule: Rule::$rule, side: Side::$side,
                dev_scaled: $scaled,
            };
        )*
        /// The pin table. Order is SPEC.md's order.
        pub const PINS: &[Pin] = &[$($name,)*];

        /// Each pinned value as a typed constant (`value::CLIENT_TIMEOUT_S` is the i64 30): code
        /// that needs the number itself, not a configuration's stricter value, reads it here, and
        /// a pin read as the wrong type is a compile error.
        pub mod value {
            $(
                #[doc = concat!("The pinned value of [`", stringify!($name), "`](super::", stringify!($name), ").")]
                pub const $name: pin_type!($kind) = $value;
            )*
        }
    };
}

pins! {
    EXPERIMENT_WARMUP_S = "experiment.warmup_s", true, "§1", "warm-up phase (discarded)", Int(60), "s", Exactly, Client, true;
    EXPERIMENT_BASELINE_S = "experiment.baseline_s", true, "§1", "baseline phase", Int(300), "s", Exactly, Client, true;
    EXPERIMENT_RECOVERY_TIMEOUT_S = "experiment.recovery_timeout_s", true, "§1", "degradation-and-recovery window (recovery timeout)", Int(600), "s", Exactly, Client, true;
    EXPERIMENT_COOLDOWN_S = "experiment.cooldown_s", true, "§1", "cooldown phase", Int(60), "s", Exactly, Client, true;
    CALIBRATION_LAMBDA_R_FRACTION = "calibration.lambda_r_fraction", true, "§1", "per-replica load as a fraction of lambda_max", Float(0.65), "", Exactly, Client, false;
    TARGET_MAX_TOKENS = "target.max_tokens", true, "§1", "max_tokens on every request", Int(256), "tokens", Exactly, Client, false;
    FAULT_PARTITION_S = "fault.partition_s", true, "§1", "black-hole partition duration (expiry armed before firing)", Int(120), "s", Exactly, Server, true;
    FAULT_DEGRADATION_S = "fault.degradation_s", true, "§10", "degradation scenario: fault duration (and the spike's)", Int(120), "s", Exactly, Client, true;
    FAULT_STALENESS_MIN_S = "fault.staleness_min_s", false, "§1", "black-hole: minimum dead-endpoint staleness with victim-bound traffic (G4)", Int(20), "s", AtLeast, Server, true;
    FAULT_NODE_MONITOR_GRACE_FAIL_S = "fault.node_monitor_grace_fail_s", false, "§1", "black-hole: a recorded node-monitor grace period this long or longer fails the run", Int(120), "s", Exactly, Server, false;
    GATES_REPLICA_SHARE_MIN_PERCENT = "gates.replica_share_min_percent", true, "§1", "G1: minimum share of baseline requests per replica", Int(45), "%", AtLeast, Server, false;
    GATES_REPLICA_SHARE_MAX_PERCENT = "gates.replica_share_max_percent", true, "§1", "G1: maximum share of baseline requests per replica", Int(55), "%", AtMost, Server, false;
    CLIENT_CONNECTIONS_FLOOR_PER_REPLICA = "client.connections_floor_per_replica", true, "§1", "connection pool floor per replica", Int(4), "connections", AtLeast, Client, false;
    CLIENT_RETRIES = "client.retries", true, "§1", "retries", Int(0), "", Exactly, Client, false;
    GATES_SEND_SKEW_P99_MS = "gates.send_skew_p99_ms", true, "§2", "send skew p99 (actual minus intended dispatch)", Int(5), "ms", AtMost, Client, false;
    GATES_SEND_SKEW_MAX_MS = "gates.send_skew_max_ms", true, "§2", "send skew max", Int(50), "ms", AtMost, Client, false;
    GATES_UNDISPATCHED_MAX = "gates.undispatched_max", true, "§2", "scheduled but never dispatched requests", Int(0), "requests", AtMost, Client, false;
    GATES_HOST_CPU_MAX_PERCENT = "gates.host_cpu_max_percent", true, "§2", "host CPU over any window", Int(70), "%", AtMost, Client, false;
    GATES_HOST_CPU_WINDOW_S = "gates.host_cpu_window_s", true, "§2", "host CPU window", Int(5), "s", Exactly, Client, false;
    GATES_RUNTIME_STALL_P99_US = "gates.runtime_stall_p99_us", true, "§2", "runtime stall p99, strictly below (ticker lateness)", Int(1000), "us", AtMost, Client, false;
    SHARDS_START_LATE_MAX_MS = "shards.start_late_max_ms", true, "§2", "sharded capture: a shard ready this long after the agreed epoch refuses to record (the start barrier; equal to the skew-max gate, so a late start alone never sends a request later than the gate allows)", Int(50), "ms", AtMost, Client, false;
    SHARDS_CLOCK_ERROR_MAX_MS = "shards.clock_error_max_ms", true, "§2", "sharded capture: merge refuses a shard whose host clock error bound (the kernel's adjtimex maxerror) is larger, unless every shard shares one host's clock", Int(10), "ms", AtMost, Client, false;
    CLIENT_BEHIND_LAG_MS = "client.behind_lag_ms", false, "§2", "fall-behind policy: a request sent this long after its intended time, or not yet sent this long after it, finds the recorder behind schedule", Int(1_000), "ms", AtMost, Client, false;
    CLIENT_BEHIND_SPAN_MS = "client.behind_span_ms", false, "§2", "fall-behind policy: behind schedule for this span of intended time without a break, the recorder stops offered load and seals the run escaped (client-behind)", Int(1_000), "ms", AtMost, Client, false;
    CLIENT_CONNECT_BUDGET_S = "client.connect_budget_s", false, "§2", "connect plus TLS handshake of one connection, at most (and never past the request's own deadline)", Int(10), "s", AtMost, Client, false;
    CLIENT_RESPONSE_HEAD_BYTES_MAX = "client.response_head_bytes_max", false, "§2", "largest response head, and largest trailer section, read (larger: malformed-framing)", Int(65_536), "bytes", AtMost, Client, false;
    CLIENT_H2_CONTROL_FRAMES_PER_S_MAX = "client.h2_control_frames_per_s_max", false, "§2", "HTTP/2: SETTINGS and PING frames (acknowledgements aside) a server may send on one connection within a second (more: the client ends the connection, its open streams malformed-framing)", Int(100), "frames", AtMost, Client, false;
    CLIENT_CHUNK_LINE_BYTES_MAX = "client.chunk_line_bytes_max", false, "§2", "largest chunk-size line, extensions included (larger: malformed-framing)", Int(1_024), "bytes", AtMost, Client, false;
    CLIENT_SSE_EVENT_BYTES_MAX = "client.sse_event_bytes_max", false, "§2", "largest server-sent event (larger: malformed-sse)", Int(1_048_576), "bytes", AtMost, Client, false;
    CLIENT_BODY_KEPT_BYTES_MAX = "client.body_kept_bytes_max", false, "§2", "largest non-streamed body kept for verification (larger: malformed-framing)", Int(4_194_304), "bytes", AtMost, Client, false;
    CLIENT_CONTENT_GAPS_MAX = "client.content_gaps_max", false, "§2", "content gaps recorded per request (the rest are counted in its content events)", Int(131_072), "gaps", AtMost, Client, false;
    CLIENT_STREAM_DELIVERIES_MAX = "client.stream_deliveries_max", false, "§2", "deliveries (moments the read loop saw new deltas) a stream record lists per request (the rest are counted in its total)", Int(65_536), "deliveries", AtMost, Client, false;
    CLIENT_REPLICA_BYTES_MAX = "client.replica_bytes_max", false, "§2", "longest replica name recorded from a response header (longer: cut at a character boundary)", Int(256), "bytes", AtMost, Client, false;
    SERVER_SCRAPE_PERIOD_MS = "server.scrape_period_ms", false, "§2", "server-side evidence: each replica's metrics endpoint (and each server_metrics.extra) is scraped this often, divided by the dev time factor but never more often than client.gauge_period_floor_ms; a scrape gives up after one period", Int(1_000), "ms", Exactly, Client, false;
    PATH_HEAD_HELD_PERCENT = "path.head_held_percent", false, "§2", "A4 (v0.5): the first token's path: a window whose completed requests got their response head in the same read as their first token more often than this shows the held-head signature", Int(50), "%", Exactly, Analysis, false;
    PATH_FIRST_DELIVERY_BATCHED_DELTAS = "path.first_delivery_batched_deltas", false, "§2", "A4 (v0.5): the first token's path: a window whose median first delivery carried this many deltas or more shows the batched-first-delivery signature", Int(3), "deltas", Exactly, Analysis, false;
    PATH_AFTER_SERVER_PERCENT = "path.after_server_percent", false, "§2", "A4 (v0.5): the first token's path, with server metrics: a window where more than this share of the client's mean time to first token came after the server's first token (its first-token gap beyond its end-to-end gap) shows the held-after-the-server signature", Int(50), "%", Exactly, Analysis, false;
    PREFIX_REUSE_TOLERANCE_POINTS = "server.prefix_reuse_tolerance_points", false, "§2", "A4 (v0.5): where the workload declares shared prefixes, a window whose server prefix-cache hit share is within this many percentage points of the designed reuse agrees with the design; further below or above, its verdict says which way", Int(10), "points", Exactly, Analysis, false;
    SERVER_SCRAPE_CPU_MAX_PERCENT = "server.scrape_cpu_max_percent", false, "§2", "server-side evidence: CPU a source's scrapes (reading and parsing its answers) may take, as a share of one CPU; a scrape that took more spaces the next one out until the share holds, so a metrics endpoint cannot compete with the workers", Int(5), "%", AtMost, Client, false;
    SERVER_SCRAPE_BYTES_MAX = "server.scrape_bytes_max", false, "§2", "server-side evidence: largest metrics answer read (larger: a scrape event, no record, the connection closed)", Int(4_194_304), "bytes", AtMost, Client, false;
    CLIENT_DETAIL_BYTES_MAX = "client.detail_bytes_max", false, "§2", "longest detail recorded with a request's class (longer: cut at a character boundary)", Int(1_024), "bytes", AtMost, Client, false;
    CLIENT_TIMEOUT_S = "client.timeout_s", true, "§3", "client timeout (censoring horizon)", Int(30), "s", Exactly, Client, true;
    ANALYSIS_CROSSING_TOLERANCE = "analysis.crossing_tolerance", true, "§3", "quantile crossing test, absolute tolerance", Float(1e-9), "", Exactly, Analysis, false;
    ANALYSIS_CONDITIONAL_CAVEAT_FRACTION = "analysis.conditional_caveat_fraction", true, "§3", "errored+censored fraction above which the curve accompanies completed-only percentiles", Float(0.05), "", AtMost, Analysis, false;
    ANALYSIS_INTERTOKEN_FLOOR_US = "analysis.intertoken_floor_us", true, "§3", "smallest recorded inter-chunk gap", Int(1), "us", Exactly, Client, false;
    ANALYSIS_INTERTOKEN_FLOOR_PERCENT_MAX = "analysis.intertoken_floor_percent_max", false, "§3", "A4 (v0.5): largest share of a window's inter-token gaps at the 1 us floor (the read's resolution) with which its inter-token quantiles are published; above it each is refused, as is any quantile at the floor", Int(50), "%", AtMost, Analysis, false;
    ANALYSIS_HISTOGRAM_LOWEST_US = "analysis.histogram_lowest_us", true, "§3", "histogram lowest discernible value", Int(1), "us", Exactly, Analysis, false;
    ANALYSIS_HISTOGRAM_HIGHEST_US = "analysis.histogram_highest_us", true, "§3", "histogram highest trackable value", Int(600_000_000), "us", Exactly, Analysis, false;
    ANALYSIS_HISTOGRAM_SIGNIFICANT_FIGURES = "analysis.histogram_significant_figures", true, "§3", "histogram significant figures", Int(3), "", Exactly, Analysis, false;
    ANALYSIS_REBASE_OVERSHOOT_MAX_MS = "analysis.rebase_overshoot_max_ms", false, "§3", "completion re-based to t_i may exceed the horizon by at most", Int(50), "ms", AtMost, Analysis, false;
    SLO_TTFT_MS = "slo.ttft_ms", true, "§4", "SLO: time to first token", Int(1000), "ms", Exactly, Analysis, false;
    SLO_E2E_MS = "slo.e2e_ms", true, "§4", "SLO: end-to-end latency", Int(14_000), "ms", Exactly, Analysis, false;
    GATES_BASELINE_GOODPUT_MIN = "gates.baseline_goodput_min", true, "§4", "G6: baseline goodput", Float(0.99), "", AtLeast, Analysis, false;
    SLO_SWEEP_TTFT_LOW_MS = "slo.sweep_ttft_low_ms", false, "§4", "SLO sweep: lowest TTFT threshold (then the SLO's, then the highest)", Int(800), "ms", Exactly, Analysis, false;
    SLO_SWEEP_TTFT_HIGH_MS = "slo.sweep_ttft_high_ms", false, "§4", "SLO sweep: highest TTFT threshold", Int(1500), "ms", Exactly, Analysis, false;
    SLO_SWEEP_E2E_LOW_MS = "slo.sweep_e2e_low_ms", false, "§4", "SLO sweep: lowest e2e threshold (then the SLO's, then the highest)", Int(12_000), "ms", Exactly, Analysis, false;
    SLO_SWEEP_E2E_HIGH_MS = "slo.sweep_e2e_high_ms", false, "§4", "SLO sweep: highest e2e threshold", Int(18_000), "ms", Exactly, Analysis, false;
    SLO_MODAL_BIN_FRACTION = "slo.modal_bin_fraction", false, "§4", "modal latency: bin width as a fraction of the window median", Float(0.01), "", Exactly, Analysis, false;
    SLO_MODAL_BIN_FLOOR_MS = "slo.modal_bin_floor_ms", false, "§4", "modal latency: bin width floor", Int(1), "ms", Exactly, Analysis, false;
    RECOVERY_WINDOW_S = "recovery.window_s", true, "§5", "detector sliding window R", Int(10), "s", Exactly, Analysis, true;
    RECOVERY_ENTRY_PERCENT = "recovery.entry_percent", true, "§5", "detector entry, % of the baseline's goodput", Int(90), "%", Exactly, Analysis, false;
    RECOVERY_EXIT_PERCENT = "recovery.exit_percent", true, "§5", "detector exit, % of the baseline's goodput", Int(85), "%", Exactly, Analysis, false;
    RECOVERY_HOLD_S = "recovery.hold_s", true, "§5", "detector hold H", Int(30), "s", Exactly, Analysis, true;
    RECOVERY_BUCKET_S = "recovery.bucket_s", true, "§5", "goodput bucket", Int(1), "s", Exactly, Analysis, true;
    RECOVERY_WINDOW_MIN_REQUESTS = "recovery.window_min_requests", false, "§5", "A2 (v0.3): fewest scheduled requests in a detector window for its reading to count (resolves entry from exit)", Int(20), "requests", AtLeast, Analysis, false;
    RECOVERY_SWEEP_ENTRY_LOW_PERCENT = "recovery.sweep_entry_low_percent", false, "§5", "sensitivity sweep: lowest entry X (then the pin, then the highest)", Int(85), "%", Exactly, Analysis, false;
    RECOVERY_SWEEP_ENTRY_HIGH_PERCENT = "recovery.sweep_entry_high_percent", false, "§5", "sensitivity sweep: highest entry X", Int(95), "%", Exactly, Analysis, false;
    RECOVERY_SWEEP_WINDOW_LOW_S = "recovery.sweep_window_low_s", false, "§5", "sensitivity sweep: shortest window R", Int(5), "s", Exactly, Analysis, true;
    RECOVERY_SWEEP_WINDOW_HIGH_S = "recovery.sweep_window_high_s", false, "§5", "sensitivity sweep: longest window R", Int(20), "s", Exactly, Analysis, true;
    RECOVERY_SWEEP_HOLD_LOW_S = "recovery.sweep_hold_low_s", false, "§5", "sensitivity sweep: shortest hold H", Int(15), "s", Exactly, Analysis, true;
    RECOVERY_SWEEP_HOLD_HIGH_S = "recovery.sweep_hold_high_s", false, "§5", "sensitivity sweep: longest hold H (27 cells in all, exit fixed)", Int(60), "s", Exactly, Analysis, true;
    CAMPAIGN_RUNS = "campaign.runs", true, "§5", "runs per (variant, config)", Int(5), "runs", Exactly, Analysis, false;
    SCHEMA_VERSION = "schema_version", true, "§6", "configuration schema version", Int(1), "", Exactly, Client, false;
    STATISTICS_CONFIDENCE_PERCENT = "statistics.confidence_percent", true, "§7", "interval confidence level", Int(95), "%", Exactly, Analysis, false;
    STATISTICS_T_QUANTILE_DF4 = "statistics.t_quantile_df4", false, "§7", "t quantile for run-level intervals (df = 4)", Float(2.776), "", Exactly, Analysis, false;
    STATISTICS_P95_INTERVAL_MIN_N = "statistics.p95_interval_min_n", false, "§7", "smallest completed sample with a p95 interval", Int(73), "requests", Exactly, Analysis, false;
    STATISTICS_P99_INTERVAL_MIN_N = "statistics.p99_interval_min_n", false, "§7", "smallest completed sample with a p99 interval", Int(381), "requests", Exactly, Analysis, false;
    STATISTICS_TAIL_LAG_MAX = "statistics.tail_lag_max", false, "§7", "A4 (v0.5): longest lag, in requests, at which a tail's exceedances are read for its effective sample size; a correlation still positive there refuses the interval", Int(3000), "requests", AtMost, Analysis, false;
    STATISTICS_SHARE_MIN_REQUESTS = "statistics.share_min_requests", false, "§9", "A3 (v0.4): fewest requests a published share of the recovery reading may rest on (one request moves it 5 points); fewer and it is refused", Int(20), "requests", AtLeast, Analysis, false;
    CALIBRATION_START_RPS = "calibration.start_rps", true, "§10", "calibration coarse ramp start (doubling)", Int(2), "rps", Exactly, Client, false;
    CALIBRATION_FINE_STEP_PERCENT = "calibration.fine_step_percent", true, "§10", "calibration fine step", Int(10), "%", Exactly, Client, false;
    CALIBRATION_SETTLE_S = "calibration.settle_s", true, "§10", "calibration step settle", Int(30), "s", Exactly, Client, true;
    CALIBRATION_MEASURE_S = "calibration.measure_s", true, "§10", "calibration step measured", Int(120), "s", Exactly, Client, true;
    CALIBRATION_STEP_GOODPUT_MIN = "calibration.step_goodput_min", true, "§10", "calibration step passes at goodput", Float(0.99), "", AtLeast, Client, false;
    CALIBRATION_STEP_WAITING_MAX = "calibration.step_waiting_max", true, "§10", "calibration step passes at mean waiting-queue gauge", Float(1.0), "", AtMost, Server, false;
    CALIBRATION_DISAGREEMENT_PERCENT = "calibration.disagreement_percent", true, "§10", "two calibrations disagreeing by more than this need a third", Int(10), "%", AtMost, Client, false;
    CALIBRATION_STEP_ATTEMPTS_MAX = "calibration.step_attempts_max", true, "§10", "recordings of a calibration step that only the client gate spoiled, the first included (each in the trace)", Int(3), "recordings", AtMost, Client, false;
    CALIBRATION_PROBE_SAMPLES = "calibration.probe_samples", false, "§10", "A4 (v0.5) capacity check: sample requests the pre-flight sends one after another before the epoch of a run whose configuration carries a calibration, and of each calibration step; their median time to the last byte is the run's capacity probe", Int(5), "requests", AtLeast, Client, false;
    CALIBRATION_CAPACITY_TOLERANCE_PERCENT = "calibration.capacity_tolerance_percent", false, "§10", "A4 (v0.5) capacity check: a probe whose median differs from the calibration's by more than this share of the larger was not taken at the calibrated capacity; a campaign group whose runs' probes differ by more than this is refused", Int(25), "%", AtMost, Analysis, false;
    FAULT_CONFIRM_WITHIN_S = "fault.confirm_within_s", false, "§10", "fault fidelity: the fault's impact is confirmed within this long of the fire (real time, never scaled), or the recorder stops offered load and seals the run escaped (impact-unconfirmed)", Int(5), "s", AtMost, Server, false;
    FAULT_TELEMETRY_GAP_MAX_S = "fault.telemetry_gap_max_s", false, "§10", "before the fire of a fault run, a replica whose waiting-queue gauge was read and has then gone unread this long (real time, never scaled) ends the run escaped (telemetry-missing): G7 would rest on telemetry that disappeared", Int(5), "s", AtMost, Server, false;
    GATES_WAITING_QUEUE_MAX = "gates.waiting_queue_max", true, "§10", "G7: baseline mean waiting-queue gauge per replica", Float(1.0), "", AtMost, Server, false;
    CLIENT_GAUGE_PERIOD_FLOOR_MS = "client.gauge_period_floor_ms", false, "§10", "a replica's waiting-queue gauge (GET /metrics) is read once per goodput bucket, and the server's metrics every server.scrape_period_ms, but never more often than this in real time, whatever the dev time factor; readiness (GET /health) is probed once per bucket only in a fault run, whose recovery reads it", Int(250), "ms", AtLeast, Client, false;
}

/// The pin with this stable key (what a configuration file or a report names), if any.
pub fn find(key: &str) -> Option<&'static Pin> {
    PINS.iter().find(|p| p.key == key)
}

/// Whether `configured` weakens `pin`. Types must already agree (the loader checks that).
pub fn weakens(pin: &Pin, configured: Value) -> bool {
    match (pin.rule, pin.value, configured) {
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
        "| clause | pin | value | rule | key | side | dev-scaled |\n|---|---|---|---|---|---|---|\n",
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
            if p.configurable {
                format!("`{}`", p.key)
            } else {
                format!("`{}` (not configurable)", p.key)
            },
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

/// The whole schedule of a §1 fault run, in experiment seconds: warm-up, baseline, the
/// degradation-and-recovery window and cooldown (1,020 s).
pub const FAULT_RUN_SCHEDULE_S: i64 = value::EXPERIMENT_WARMUP_S
    + value::EXPERIMENT_BASELINE_S
    + value::EXPERIMENT_RECOVERY_TIMEOUT_S
    + value::EXPERIMENT_COOLDOWN_S;

/// The §4 sweep's TTFT thresholds in ms: lowest, the SLO's, highest.
pub const SLO_SWEEP_TTFT_MS: [i64; 3] = [
    value::SLO_SWEEP_TTFT_LOW_MS,
    value::SLO_TTFT_MS,
    value::SLO_SWEEP_TTFT_HIGH_MS,
];

/// The §4 sweep's end-to-end thresholds in ms: lowest, the SLO's, highest.
pub const SLO_SWEEP_E2E_MS: [i64; 3] = [
    value::SLO_SWEEP_E2E_LOW_MS,
    value::SLO_E2E_MS,
    value::SLO_SWEEP_E2E_HIGH_MS,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique() {
        let mut keys: Vec<_> = PINS.iter().map(|p| p.key).collect();
        keys.sort();
        let before = keys.len();
        keys.dedup();
        assert_eq!(before, keys.len(), "a key appears twice in PINS");
    }

    #[test]
    fn direction_of_weakening() {
        let skew = &GATES_SEND_SKEW_P99_MS;
        assert!(weakens(skew, Value::Int(6)));
        assert!(!weakens(skew, Value::Int(4)));
        assert!(!weakens(skew, Value::Int(5)));
        let goodput = &GATES_BASELINE_GOODPUT_MIN;
        assert!(weakens(goodput, Value::Float(0.98)));
        assert!(!weakens(goodput, Value::Float(0.995)));
        let timeout = &CLIENT_TIMEOUT_S;
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
