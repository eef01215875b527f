//! The report of one run (`report.json`): what `percentes analyze` writes, field by field.

use serde::Serialize;

use super::{CleanupReport, EscapeReport, Gate, RecoveryReport};
use crate::estimate::histogram::LatencyHistogram;

/// The report schema this build writes; bumped on any change a reader would notice.
pub const REPORT_SCHEMA: &str = "percentes-report/1";

/// Who analyzed: the caller's version and commit (the binary knows its own build).
#[derive(Clone, Debug, Default)]
pub struct Analyzer {
    pub version: String,
    pub commit: String,
}

/// The analysis of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub provenance: Provenance,
    /// Empty when the results may be published; otherwise every reason, each starting
    /// `NOT PUBLISHABLE`.
    pub not_publishable: Vec<String>,
    pub validity: Validity,
    pub timeline: TimelineReport,
    /// Per-window statistics; empty when a run-invalidating gate failed (§9: nothing published).
    pub windows: Vec<WindowReport>,
    /// Why `windows` is empty, when it is.
    pub windows_withheld: Option<String>,
    pub in_flight_at_fire: Option<InFlight>,
    /// The §5 recovery analysis of a fault run (withheld with the windows when invalid).
    pub recovery: Option<RecoveryReport>,
    /// The cleanup verdict of a fault run that fired (seeds/004): never withheld.
    pub cleanup: Option<CleanupReport>,
    /// What an escaped experiment's report keeps (seeds/004): never withheld.
    pub escape: Option<EscapeReport>,
    /// The appendix's headline sentence filled from this run alone (empty slots say
    /// `[not measured]`); `percentes campaign` fills it over five runs.
    pub headline: String,
    pub audit: Audit,
}

/// What the report cites (§9).
#[derive(Clone, Debug, Serialize)]
pub struct Provenance {
    pub spec_applied: String,
    pub spec_at_capture: String,
    pub curve_method: String,
    pub analyzer_version: String,
    pub analyzer_commit: String,
    pub recorder_version: String,
    pub recorder_commit: String,
    pub config_hash: String,
    pub chain_head: String,
    pub journal_verdict: String,
    pub seal: String,
    pub schedule_digest: String,
    pub profile: String,
    pub dev_time_factor: u32,
    pub target_kind: String,
    pub fault_variant: String,
    /// Printed in every report when certificate verification was off.
    pub tls_insecure: bool,
}

/// The client-validity gate (§2), gate by gate.
#[derive(Clone, Debug, Serialize)]
pub struct Validity {
    pub valid: bool,
    pub gates: Vec<Gate>,
}

/// The windows and the instants they were cut at (§3).
#[derive(Clone, Debug, Serialize)]
pub struct TimelineReport {
    pub inject_s: Option<f64>,
    pub fired_s: Option<f64>,
    pub fire_anchor_s: Option<f64>,
    /// The recovery boundary (end of the detector window that entered recovery to the pre-fault
    /// baseline), or why there is none.
    pub recovered_s: Option<f64>,
    pub recovery_note: String,
    pub windows: Vec<WindowBounds>,
}

#[derive(Clone, Debug, Serialize)]
pub struct WindowBounds {
    pub window: &'static str,
    pub start_s: f64,
    pub end_s: f64,
    pub scheduled: u64,
}

/// A count or share with its n and label.
#[derive(Clone, Debug, Serialize)]
pub struct Share {
    pub value: Option<f64>,
    pub n: u64,
    pub label: &'static str,
}

/// Everything one window reports.
#[derive(Clone, Debug, Serialize)]
pub struct WindowReport {
    pub window: &'static str,
    pub start_s: f64,
    pub end_s: f64,
    pub scheduled: u64,
    pub outcomes: Outcomes,
    /// Count per response class, by class name.
    pub classes: std::collections::BTreeMap<String, u64>,
    pub error_rate: Share,
    pub censored_rate: Share,
    /// Completions per second of the window.
    pub throughput_rps: Share,
    pub goodput: Share,
    /// Goodput at the 3 x 3 thresholds (§4): rows TTFT 800/1000/1500 ms, columns e2e 12/14/18 s.
    pub goodput_sweep: Vec<SweepCell>,
    pub completion: CurveReport,
    pub ttft: Distribution,
    pub e2e: Distribution,
    pub inter_chunk: Distribution,
    /// Present when errored + censored is above 5 % of scheduled (§3).
    pub caveat: Option<String>,
    /// Only on the fault window: §4's distance of its modal latency from each threshold.
    pub modal_distance: Vec<ModalDistance>,
    /// The window segmented by route (seeds/004: a global rate cannot prove containment); only
    /// when the configuration has more than one route.
    pub routes: Vec<RouteSegment>,
    /// The receive-path check (§2): how late the recorder's read loop saw events of known
    /// timing. Reported, never a gate.
    pub receive_path: ReceivePath,
}

/// The loopback canary's reading over one window (SPEC §2 receive-path caveat): the recorder
/// streamed itself events of known timing through the same read loop as the responses, and
/// journaled each second's lag (seen minus written) as a `canary` event.
#[derive(Clone, Debug, Serialize)]
pub struct ReceivePath {
    /// Canary summaries (one a second) whose second overlaps the window.
    pub canary_seconds: u64,
    pub canary_samples: u64,
    /// The highest per-second nearest-rank p99 lag, us: an upper bound on the window's pooled
    /// p99 (every second's p99 at most x leaves at most 1 % of the samples above x).
    pub canary_p99_max_us: Option<f64>,
    /// The largest single lag, us.
    pub canary_max_us: Option<f64>,
    /// The reading in words: what it bounds, or why there is none.
    pub text: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcomes {
    pub completed: u64,
    pub errored: u64,
    pub censored: u64,
    pub undispatched: u64,
    /// Scheduled but absent from an unsealed or cut-off journal.
    pub no_record: u64,
}

/// One route's share of a window.
#[derive(Clone, Debug, Serialize)]
pub struct RouteSegment {
    pub route: String,
    pub scheduled: u64,
    pub outcomes: Outcomes,
    /// Terminal classes, by name.
    pub classes: std::collections::BTreeMap<String, u64>,
    /// HTTP statuses of the requests that got a response head.
    pub statuses: std::collections::BTreeMap<u16, u64>,
    /// Errored over scheduled.
    pub error_rate: Option<f64>,
    /// Completed-only end-to-end latency, nearest rank, in microseconds.
    pub e2e_p95_us: Option<u64>,
    pub e2e_p99_us: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepCell {
    pub ttft_ms: u64,
    pub e2e_ms: u64,
    pub goodput: Option<f64>,
    pub n: u64,
}

/// The completion curve of a window and the readings taken from it.
#[derive(Clone, Debug, Serialize)]
pub struct CurveReport {
    /// `Aalen-Johansen (v0.2)` or `Kaplan-Meier, errors censored (v0.1)`.
    pub method: &'static str,
    pub label: &'static str,
    pub n: u64,
    pub horizon_s: f64,
    pub final_incidence: f64,
    pub ceiling: f64,
    /// Incidence of completion within 1 s of t_i (the headline's slot).
    pub within_1s: f64,
    /// Each reading in the words of §3 (`p99 = 1.234 s`, `... > 30.000 s (horizon) ...`,
    /// `... unattainable ...`).
    pub readings: Vec<Reading>,
    /// The curve at evenly spaced latencies up to the horizon, with the number at risk.
    pub grid: Vec<CurvePoint>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Reading {
    pub quantile: String,
    /// `at`, `above-horizon` or `unattainable`.
    pub kind: &'static str,
    pub seconds: Option<f64>,
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct CurvePoint {
    pub t_s: f64,
    pub incidence: f64,
    pub at_risk: u64,
}

/// A completed-only latency distribution.
#[derive(Clone, Debug, Serialize)]
pub struct Distribution {
    pub label: &'static str,
    pub n: u64,
    /// From the pinned histogram, microseconds (three significant figures).
    pub percentiles_us: Vec<(String, u64)>,
    /// p99.9 and max: descriptive only (§7).
    pub p99_9_us: Option<u64>,
    pub max_us: Option<u64>,
    pub descriptive_only: &'static str,
    /// Order-statistic intervals (§7), exact values, or the refusal line.
    pub tails: Vec<Tail>,
    /// Samples above the histogram's highest trackable value, counted at it.
    pub saturated: u64,
    #[serde(skip)]
    pub histogram: Option<LatencyHistogram>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Tail {
    pub quantile: String,
    /// Exact order statistic at rank ceil(np), us.
    pub point_us: Option<u64>,
    pub interval_us: Option<(u64, u64)>,
    pub ranks: Option<(u64, u64)>,
    /// The interval or the exact refusal line.
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ModalDistance {
    pub latency: &'static str,
    pub threshold_ms: u64,
    pub mode_ms: Option<f64>,
    pub baseline_sd_ms: Option<f64>,
    /// In baseline standard deviations; positive when the mode is under the threshold. JSON has
    /// no infinity, so a zero SD gives the text `+inf` or `-inf`.
    pub distance: String,
}

/// In-flight loss accounting at fire (§3), split by where each request was served.
#[derive(Clone, Debug, Serialize)]
pub struct InFlight {
    pub fired_s: f64,
    pub victim: String,
    pub on_victim: Outcomes,
    pub on_survivors: Outcomes,
    /// In flight but never attributed (no response header reached the client).
    pub unattributed: Outcomes,
    pub note: String,
}

/// The coordinated-omission audit (seeds/003).
#[derive(Clone, Debug, Serialize)]
pub struct Audit {
    pub workload_model: String,
    pub clock_model: String,
    /// Scheduled -> dispatched -> connected -> written -> response head -> first content ->
    /// terminal outcomes, over the whole schedule.
    pub stages: Vec<(String, u64)>,
    /// Whether every stage count is at most the one before and the outcomes sum to scheduled.
    pub reconciled: bool,
    pub reconciliation: String,
    /// Send skew (dispatch minus intended), measured windows, us.
    pub skew_us: SkewSummary,
    pub phases: Vec<PhaseRate>,
    pub telemetry: TelemetrySummary,
    /// `representative`, `descriptive only` or `rerun required`, with why.
    pub decision: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SkewSummary {
    pub n: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
}

/// Requested against achieved rate and inter-arrival, per schedule phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseRate {
    pub phase: String,
    pub duration_s: f64,
    pub requested_rps: f64,
    pub scheduled: u64,
    pub dispatched: u64,
    pub achieved_rps: f64,
    /// Target mean inter-arrival (1 / rate), and the schedule's and the dispatches' mean and
    /// coefficient of variation (Poisson: CV 1; deterministic: 0).
    pub target_mean_gap_ms: f64,
    pub target_cv: f64,
    pub scheduled_mean_gap_ms: Option<f64>,
    pub scheduled_cv: Option<f64>,
    pub dispatched_mean_gap_ms: Option<f64>,
    pub dispatched_cv: Option<f64>,
    /// Kolmogorov-Smirnov distance of the dispatched inter-arrivals from the target law.
    pub dispatched_ks: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TelemetrySummary {
    pub samples: u64,
    pub host_cpu_max_5s_percent: Option<f64>,
    pub recorder_cpu_percent_of_one_core: Option<f64>,
    pub stall_p99_max_us: Option<f64>,
    pub stall_max_us: Option<f64>,
    pub writer_queue_max: u64,
    pub writer_queue_full_events: u64,
    pub undispatched_total: u64,
}
