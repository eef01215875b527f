//! A loaded run analyzed under one spec version: windows, per-window metrics, the completion
//! curve and its quantile readings, tail intervals, the SLO, in-flight loss at fire, the
//! client-validity gate and the coordinated-omission audit (SPEC §2-§4, §7, §9).
//!
//! Everything here is a pure function of the [`Run`] and the spec version, so the same journal
//! gives the same [`Report`] on any machine. Rendering is in [`crate::report`].

use percentes_formats::config::{FaultVariant, TargetKind};
use percentes_formats::journal::hex;
use percentes_formats::journal::records::{class_name, EventRecord, Outcome};
use percentes_formats::pins;
use serde::Serialize;

use crate::estimate::histogram::LatencyHistogram;
use crate::estimate::incidence::{CompletionCurve, Fate, Method, Observation};
use crate::estimate::quantile;
use crate::estimate::recovery::{self, Bucket, Detection, Detector};
use crate::estimate::slo::{self, Completed, Distance, Slo, SloInput};
use crate::estimate::tails::{self, TailInterval};
use crate::frame::{Requests, NONE};
use crate::load::Run;
use crate::windows::{self, FaultTimes, Kind, Timeline, Window};
use crate::JournalFile;

/// The report schema this build writes; bumped on any change a reader would notice.
pub const REPORT_SCHEMA: &str = "percentes-report/1";

/// Quantiles read from the completion curve and the completed-only histograms.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.95, 0.99];
/// Tail quantiles that get order-statistic intervals (§7).
pub const TAIL_QUANTILES: [f64; 2] = [0.95, 0.99];
/// Points at which the report tabulates the completion curve, as fractions of the horizon.
const CURVE_GRID_POINTS: u64 = 100;

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
    pub recovery: Option<crate::recovery::RecoveryReport>,
    /// The cleanup verdict of a fault run that fired (seeds/004): never withheld.
    pub cleanup: Option<crate::escape::CleanupReport>,
    /// What an escaped experiment's report keeps (seeds/004): never withheld.
    pub escape: Option<crate::escape::EscapeReport>,
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

/// One gate's reading.
#[derive(Clone, Debug, Serialize)]
pub struct Gate {
    /// E.g. `G2.1 send skew p99`.
    pub gate: String,
    pub clause: &'static str,
    /// `run-invalidating`, `label-only` (G3, G4) or `reported` (hosted G6).
    pub effect: &'static str,
    /// `pass`, `fail`, `unobserved` (which counts as failed, §10), `not applicable`,
    /// `not evaluable` (a server-side gate against a hosted target, §6) or `campaign-level` (G5).
    pub status: &'static str,
    pub limit: String,
    pub observed: String,
    /// By how much a failing gate missed, in the limit's unit.
    pub by: Option<String>,
    /// Samples the reading is over.
    pub n: u64,
    pub note: String,
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

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Analyzes `run` under `method` (the spec version's curve).
///
/// `file` is the journal `run` was loaded from: the pooled inter-chunk gaps are read from it in a
/// second pass once the windows are known, so they are never held per request.
pub fn analyze(run: &Run, file: &JournalFile, method: Method, analyzer: &Analyzer) -> Report {
    let requests = &run.requests;
    let config = &run.config;
    let horizon_ns = config.duration_ns("client.timeout_s");
    let bucket_ns = config.duration_ns("recovery.bucket_s").max(1);
    let timeline = timeline_of(run);
    let slo = Slo::pinned();

    // Per row: whether the SLO was met (for goodput and the recovery boundary).
    let met: Vec<bool> = (0..requests.len())
        .map(|row| slo.met_by(&slo_input(requests, row)))
        .collect();

    // The recovery boundary: the pinned detector against the baseline's goodput (§5).
    let provisional = windows::cut(&timeline, None);
    let mut recovered_at_ns = None;
    let mut recovery_note = String::from("no fault in this run");
    if let Some(fault) = timeline.fault {
        let baseline = provisional[1];
        let series = goodput_series(requests, &met, bucket_ns, timeline.measured_end_ns);
        let in_baseline = (0..requests.len())
            .filter(|&row| baseline.contains(requests.intended_ns[row]))
            .collect::<Vec<_>>();
        let baseline_goodput = (!in_baseline.is_empty()).then(|| {
            in_baseline.iter().filter(|&&row| met[row]).count() as f64 / in_baseline.len() as f64
        });
        let anchor_bucket = usize::try_from(fault.anchor_ns().div_ceil(bucket_ns)).unwrap_or(0);
        let phase_end_bucket = usize::try_from(timeline.measured_end_ns / bucket_ns).unwrap_or(0);
        let series = &series[..phase_end_bucket.min(series.len())];
        match baseline_goodput
            .map(|g| recovery::detect(series, anchor_bucket, g, Detector::pinned()))
        {
            Some(Detection::Recovered { entry_end_s, ttr_s }) => {
                recovered_at_ns = Some(entry_end_s * bucket_ns);
                recovery_note = format!(
                    "recovered to the pre-fault baseline {:.3} s after the fire anchor (pinned detector, §5)",
                    seconds(ttr_s * bucket_ns)
                );
            }
            Some(Detection::NotRecovered) => {
                recovery_note = "no recovery to the pre-fault baseline within the recovery timeout: the fault window runs to its end and the recovery window is empty".into();
            }
            Some(Detection::NoBaseline) | None => {
                recovery_note = "the baseline has no goodput to recover to: the fault window runs to the end of the recovery timeout".into();
            }
        }
    }
    let cut = windows::cut(&timeline, recovered_at_ns);

    // Rows per window, by intended time.
    let mut rows_of: Vec<Vec<usize>> = vec![Vec::new(); cut.len()];
    for row in 0..requests.len() {
        if let Some(w) = windows::locate(&cut, requests.intended_ns[row]) {
            rows_of[w].push(row);
        }
    }

    let skews = measured_skews(run, &cut, &rows_of);
    let mut validity = gates(run, &cut, &skews);
    validity
        .gates
        .extend(crate::gates::evaluate(run, &cut, &rows_of, &met));
    validity.gates.push(crate::escape::containment_gate(run));
    validity.valid = validity.gates.iter().all(gate_holds);
    let audit = audit(run, &cut, &skews, &validity);
    let mut not_publishable = run.not_publishable.clone();
    if config.target.tls.insecure {
        not_publishable.push(
            "TLS certificate verification was OFF for this run (target.tls.insecure = true)".into(),
        );
    }

    let baseline_rows = cut
        .iter()
        .position(|w| w.kind == Kind::Baseline)
        .map(|i| rows_of[i].as_slice())
        .unwrap_or(&[]);
    let (windows_out, withheld) = if validity.valid {
        let mut gaps = inter_chunk(run, file, &cut).into_iter();
        let reports = cut
            .iter()
            .zip(&rows_of)
            .map(|(window, rows)| {
                let mut report =
                    window_report(run, window, rows, baseline_rows, method, horizon_ns);
                report.inter_chunk = distribution(&[], gaps.next());
                report.inter_chunk.label = INTER_CHUNK;
                report
            })
            .collect();
        (reports, None)
    } else {
        let failed: Vec<&str> = validity
            .gates
            .iter()
            .filter(|g| !gate_holds(g))
            .map(|g| g.gate.as_str())
            .collect();
        (
            Vec::new(),
            Some(format!(
                "the run is invalid (§9, §10): {} did not pass; no statistic is published",
                failed.join(", ")
            )),
        )
    };
    let in_flight = timeline
        .fault
        .and_then(|f| f.fired_ns)
        .map(|fired| in_flight_at(run, fired));
    let recovery = if validity.valid {
        crate::recovery::analyze(run, &met, &timeline, &cut, &validity.gates)
    } else {
        None
    };

    let cleanup = crate::escape::cleanup(run);
    let escape = crate::escape::escape(run, cleanup.as_ref());
    let mut report = Report {
        schema: REPORT_SCHEMA,
        provenance: provenance(run, method, analyzer),
        not_publishable,
        validity,
        timeline: TimelineReport {
            inject_s: timeline.fault.map(|f| seconds(f.inject_ns)),
            fired_s: timeline.fault.and_then(|f| f.fired_ns).map(seconds),
            fire_anchor_s: timeline.fault.map(|f| seconds(f.anchor_ns())),
            recovered_s: recovered_at_ns.map(seconds),
            recovery_note,
            windows: cut
                .iter()
                .zip(&rows_of)
                .map(|(w, rows)| WindowBounds {
                    window: w.kind.name(),
                    start_s: seconds(w.start_ns),
                    end_s: seconds(w.end_ns),
                    scheduled: rows.len() as u64,
                })
                .collect(),
        },
        windows: windows_out,
        windows_withheld: withheld,
        in_flight_at_fire: in_flight,
        recovery,
        cleanup,
        escape,
        headline: String::new(),
        audit,
    };
    // The appendix's headline is the §1 experiment's sentence; a degradation scenario has none.
    if report.validity.valid && config.fault.variant.is_replica_loss() {
        report.headline = crate::campaign::single_run_headline(&report);
    }
    report
}

/// The timeline of `run`: phase ends from the recorded schedule, the fire from its events.
pub fn timeline_of(run: &Run) -> Timeline {
    let phases = &run.header.schedule.phases;
    let mut ends = Vec::with_capacity(phases.len());
    let mut at = 0u64;
    for phase in phases {
        at += phase.duration_ns;
        ends.push((phase.name.as_str(), at));
    }
    let end_of = |name: &str| ends.iter().find(|(n, _)| *n == name).map(|&(_, e)| e);
    let schedule_end_ns = at;
    let warmup_end_ns = end_of("warmup").unwrap_or(0);
    let fault = run
        .header
        .schedule
        .inject_at_ns
        .map(|inject_ns| FaultTimes {
            inject_ns,
            fired_ns: run.events.first("fault-fired").map(|e| e.at_ns),
        });
    let measured_end_ns = end_of("fault-recovery")
        .or_else(|| end_of("measurement"))
        .unwrap_or(schedule_end_ns);
    Timeline {
        warmup_end_ns,
        measured_end_ns,
        schedule_end_ns,
        timeout_ns: run.config.duration_ns("client.timeout_s"),
        fault,
    }
}

/// SLO-goodput per bucket of intended time, up to `end_ns` (§5).
pub fn goodput_series(
    requests: &Requests,
    met: &[bool],
    bucket_ns: u64,
    end_ns: u64,
) -> Vec<Bucket> {
    let buckets = usize::try_from(end_ns.div_ceil(bucket_ns)).unwrap_or(0);
    let mut series = vec![Bucket::default(); buckets];
    for (&intended_ns, &met) in requests.intended_ns.iter().zip(met) {
        if let Some(bucket) = series.get_mut((intended_ns / bucket_ns) as usize) {
            bucket.scheduled += 1;
            bucket.met += u64::from(met);
        }
    }
    series
}

fn completed(requests: &Requests, row: usize) -> bool {
    requests.outcome(row) == Some(Outcome::Completed)
}

/// TTFT from t_i of a completed request (its first content event; for a non-streamed response,
/// the body).
fn ttft_ns(requests: &Requests, row: usize) -> Option<u64> {
    let first = requests.first_content_ns[row];
    let first = if first == NONE {
        requests.terminal_ns[row]
    } else {
        first
    };
    completed(requests, row).then(|| first.saturating_sub(requests.intended_ns[row]))
}

fn e2e_ns(requests: &Requests, row: usize) -> Option<u64> {
    completed(requests, row)
        .then(|| requests.terminal_ns[row].saturating_sub(requests.intended_ns[row]))
}

fn slo_input(requests: &Requests, row: usize) -> SloInput {
    SloInput {
        completed: ttft_ns(requests, row)
            .zip(e2e_ns(requests, row))
            .map(|(ttft_ns, e2e_ns)| Completed { ttft_ns, e2e_ns }),
    }
}

fn provenance(run: &Run, method: Method, analyzer: &Analyzer) -> Provenance {
    let header = &run.header;
    Provenance {
        spec_applied: method.spec_version().into(),
        spec_at_capture: header.spec_version.clone(),
        curve_method: method_name(method).into(),
        analyzer_version: analyzer.version.clone(),
        analyzer_commit: analyzer.commit.clone(),
        recorder_version: header.tool_version.clone(),
        recorder_commit: header.tool_commit.clone(),
        config_hash: hex(&header.config_hash),
        chain_head: run.report.chain_head.map(|h| hex(&h)).unwrap_or_default(),
        journal_verdict: run.report.verdict.name().into(),
        seal: run
            .report
            .seal
            .as_ref()
            .map(|s| {
                if s.reason.is_empty() {
                    s.status.to_string()
                } else {
                    format!("{} ({})", s.status, s.reason)
                }
            })
            .unwrap_or_else(|| "none (unsealed)".into()),
        schedule_digest: hex(&header.schedule_digest),
        profile: header.profile.clone(),
        dev_time_factor: header.dev_time_factor,
        target_kind: run.config.target.kind.name().into(),
        fault_variant: run.config.fault.variant.name().into(),
        tls_insecure: run.config.target.tls.insecure,
    }
}

fn method_name(method: Method) -> &'static str {
    match method {
        Method::AalenJohansen => "Aalen-Johansen cumulative incidence, errors compete (v0.2)",
        Method::KaplanMeierErrorsCensored => {
            "Kaplan-Meier with errors censored (v0.1; overstates completion when errors precede completions, A1)"
        }
    }
}

fn count_outcomes(requests: &Requests, rows: impl Iterator<Item = usize>) -> Outcomes {
    let mut o = Outcomes::default();
    for row in rows {
        match requests.outcome(row) {
            Some(Outcome::Completed) => o.completed += 1,
            Some(Outcome::Errored) => o.errored += 1,
            Some(Outcome::Censored) => o.censored += 1,
            Some(Outcome::Undispatched) => o.undispatched += 1,
            None => o.no_record += 1,
        }
    }
    o
}

const CONDITIONAL: &str = "conditional on completion";
const INTER_CHUNK: &str = "conditional on completion; pooled inter-chunk gaps of the window's completed streams (a per-request p99 is not computed, §3)";

/// The pooled inter-chunk gaps of each window's completed requests, in the pinned histogram:
/// a second pass over the journal's request records, holding one histogram per window.
fn inter_chunk(run: &Run, file: &JournalFile, cut: &[Window]) -> Vec<LatencyHistogram> {
    let mut histograms = vec![LatencyHistogram::pinned(); cut.len()];
    let mut released = 0u64;
    for framed in file.framed(&run.report) {
        if framed.byte_offset >= released + crate::RELEASE_EVERY_BYTES {
            file.release_before(framed.byte_offset);
            released = framed.byte_offset;
        }
        if framed.kind != percentes_formats::journal::records::RecordKind::Request as u8
            || framed
                .body
                .get(percentes_formats::journal::records::REQUEST_OUTCOME_OFFSET)
                != Some(&(Outcome::Completed as u8))
        {
            continue;
        }
        // The gaps are read in place (JOURNAL.md's layout); the load pass already decoded and
        // checked every record in full.
        let Some((intended_ns, gaps)) =
            percentes_formats::journal::records::request_gaps(framed.body)
        else {
            continue;
        };
        if let Some(w) = windows::locate(cut, intended_ns) {
            for gap in gaps {
                histograms[w].record_us(u64::from(gap));
            }
        }
    }
    histograms
}

fn window_report(
    run: &Run,
    window: &Window,
    rows: &[usize],
    baseline_rows: &[usize],
    method: Method,
    horizon_ns: u64,
) -> WindowReport {
    let requests = &run.requests;
    let scheduled = rows.len() as u64;
    let outcomes = count_outcomes(requests, rows.iter().copied());
    let mut classes = std::collections::BTreeMap::new();
    for &row in rows {
        if requests.outcome(row).is_some() {
            let code = requests.class[row];
            let name = class_name(code).map_or_else(|| format!("class-{code}"), str::to_owned);
            *classes.entry(name).or_insert(0u64) += 1;
        }
    }
    let share = |count: u64, label| Share {
        value: (scheduled > 0).then(|| count as f64 / scheduled as f64),
        n: scheduled,
        label,
    };
    let duration_s = seconds(window.duration_ns());
    let inputs: Vec<SloInput> = rows.iter().map(|&row| slo_input(requests, row)).collect();
    let (ttft_thresholds, e2e_thresholds) = slo::sweep_thresholds_ns();
    let sweep = slo::sweep(&inputs);
    let mut goodput_sweep = Vec::new();
    for (i, ttft) in ttft_thresholds.iter().enumerate() {
        for (j, e2e) in e2e_thresholds.iter().enumerate() {
            goodput_sweep.push(SweepCell {
                ttft_ms: ttft / 1_000_000,
                e2e_ms: e2e / 1_000_000,
                goodput: sweep[i][j],
                n: scheduled,
            });
        }
    }

    let ttft: Vec<u64> = rows.iter().filter_map(|&r| ttft_ns(requests, r)).collect();
    let e2e: Vec<u64> = rows.iter().filter_map(|&r| e2e_ns(requests, r)).collect();
    let failed_share = (outcomes.errored + outcomes.censored) as f64 / scheduled.max(1) as f64;
    let caveat = (failed_share > pins::float("analysis.conditional_caveat_fraction")).then(|| {
        format!(
            "{:.4} of this window's scheduled requests errored or were censored (above 0.05, §3): every completed-only percentile describes the requests that completed, not the requests that were scheduled; read it beside the completion curve",
            failed_share
        )
    });
    let modal_distance = if window.kind == Kind::Fault {
        let base_ttft: Vec<u64> = baseline_rows
            .iter()
            .filter_map(|&r| ttft_ns(requests, r))
            .collect();
        let base_e2e: Vec<u64> = baseline_rows
            .iter()
            .filter_map(|&r| e2e_ns(requests, r))
            .collect();
        let slo = Slo::pinned();
        vec![
            modal("ttft", &base_ttft, &ttft, slo.ttft_ns),
            modal("e2e", &base_e2e, &e2e, slo.e2e_ns),
        ]
    } else {
        Vec::new()
    };
    WindowReport {
        window: window.kind.name(),
        start_s: seconds(window.start_ns),
        end_s: seconds(window.end_ns),
        scheduled,
        error_rate: share(outcomes.errored, "over all scheduled requests"),
        censored_rate: share(outcomes.censored, "over all scheduled requests"),
        throughput_rps: Share {
            value: (duration_s > 0.0).then(|| outcomes.completed as f64 / duration_s),
            n: outcomes.completed,
            label: "completions per second of intended time",
        },
        goodput: share(
            inputs.iter().filter(|i| Slo::pinned().met_by(i)).count() as u64,
            "SLO goodput over all scheduled requests (TTFT <= 1000 ms and e2e <= 14 s, §4)",
        ),
        goodput_sweep,
        completion: curve_report(requests, rows, method, horizon_ns),
        ttft: distribution(&ttft, None),
        e2e: distribution(&e2e, None),
        inter_chunk: Distribution {
            // Filled by the caller from the journal's gaps (a second pass, see `inter_chunk`).
            ..distribution(&[], None)
        },
        caveat,
        modal_distance,
        routes: route_segments(run, rows),
        receive_path: receive_path(run, window),
        outcomes,
        classes,
    }
}

/// One `canary` event read back: (p99, samples, max, interval), ns; `None` when its detail is
/// not in the recorder's form (formats/JOURNAL.md), so a damaged or foreign event is skipped.
fn canary_reading(e: &EventRecord) -> Option<(u64, u64, u64, u64)> {
    let field = |key: &str| -> Option<u64> {
        e.detail
            .split_whitespace()
            .find_map(|t| t.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
    };
    Some((
        u64::try_from(e.value?).ok()?,
        field("samples")?,
        field("max_ns")?,
        field("interval_ns")?,
    ))
}

/// The receive-path check over one window: the canary seconds that overlap it.
fn receive_path(run: &Run, window: &Window) -> ReceivePath {
    let overlapping: Vec<_> = run
        .events
        .all("canary")
        .filter_map(|e| Some((e.at_ns, canary_reading(e)?)))
        .filter(|(at, (_, _, _, interval))| {
            *at > window.start_ns && at.saturating_sub(*interval) < window.end_ns
        })
        .map(|(_, r)| r)
        .collect();
    let samples: u64 = overlapping.iter().map(|r| r.1).sum();
    let p99 = overlapping.iter().map(|r| r.0).max();
    let max = overlapping.iter().map(|r| r.2).max();
    let us = |ns: u64| ns as f64 / 1e3;
    let text = match (p99, max) {
        (Some(p99), Some(max)) => format!(
            "loopback canary: the read loop saw events of known timing at most {} late (highest per-second p99 {}; {samples} events over {} s). First-token and inter-token times here are taken when the read loop sees them, so they may be late by as much",
            duration_text(max),
            duration_text(p99),
            overlapping.len()
        ),
        _ if !run
            .events
            .all("canary")
            .any(|e| canary_reading(e).is_some()) => "no loopback canary in this journal (recorded with --no-canary, or by a recorder without one): the read loop's lag is not bounded here".into(),
        _ => "no loopback canary second overlaps this window".into(),
    };
    ReceivePath {
        canary_seconds: overlapping.len() as u64,
        canary_samples: samples,
        canary_p99_max_us: p99.map(us),
        canary_max_us: max.map(us),
        text,
    }
}

/// A lag in the unit that reads best: us below 1 ms, ms otherwise.
fn duration_text(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{:.0} us", ns as f64 / 1e3)
    } else {
        format!("{:.3} ms", ns as f64 / 1e6)
    }
}

/// The rows of a window split by route, when there is more than one route.
fn route_segments(run: &Run, rows: &[usize]) -> Vec<RouteSegment> {
    let routes = &run.config.routes;
    if routes.len() < 2 {
        return Vec::new();
    }
    let requests = &run.requests;
    routes
        .iter()
        .enumerate()
        .map(|(index, route)| {
            let mine: Vec<usize> = rows
                .iter()
                .copied()
                .filter(|&r| requests.route[r] as usize == index)
                .collect();
            let outcomes = count_outcomes(requests, mine.iter().copied());
            let mut classes = std::collections::BTreeMap::new();
            let mut statuses = std::collections::BTreeMap::new();
            for &row in &mine {
                if requests.outcome(row).is_some() {
                    let code = requests.class[row];
                    let name =
                        class_name(code).map_or_else(|| format!("class-{code}"), str::to_owned);
                    *classes.entry(name).or_insert(0u64) += 1;
                }
                if requests.http_status[row] != 0 {
                    *statuses.entry(requests.http_status[row]).or_insert(0u64) += 1;
                }
            }
            let mut e2e_us: Vec<u64> = mine
                .iter()
                .filter_map(|&r| e2e_ns(requests, r))
                .map(crate::estimate::histogram::ns_to_us)
                .collect();
            e2e_us.sort_unstable();
            let scheduled = mine.len() as u64;
            RouteSegment {
                route: route.label.clone(),
                scheduled,
                error_rate: (scheduled > 0).then(|| outcomes.errored as f64 / scheduled as f64),
                e2e_p95_us: nearest_rank(&e2e_us, 0.95),
                e2e_p99_us: nearest_rank(&e2e_us, 0.99),
                outcomes,
                classes,
                statuses,
            }
        })
        .collect()
}

fn modal(
    latency: &'static str,
    baseline: &[u64],
    fault: &[u64],
    threshold_ns: u64,
) -> ModalDistance {
    let ms = |ns: f64| (ns / 1e6 * 1000.0).round() / 1000.0;
    match slo::modal_distance(baseline, fault, threshold_ns) {
        Distance::StandardDeviations {
            mode_ns,
            sd_ns,
            distance,
        } => ModalDistance {
            latency,
            threshold_ms: threshold_ns / 1_000_000,
            mode_ms: Some(ms(mode_ns as f64)),
            baseline_sd_ms: Some(ms(sd_ns)),
            distance: if distance.is_infinite() {
                if distance > 0.0 {
                    "+inf".into()
                } else {
                    "-inf".into()
                }
            } else {
                format!("{distance:.3}")
            },
        },
        Distance::InsufficientCompletedSamples => ModalDistance {
            latency,
            threshold_ms: threshold_ns / 1_000_000,
            mode_ms: None,
            baseline_sd_ms: None,
            distance: "insufficient completed samples".into(),
        },
    }
}

fn curve_report(
    requests: &Requests,
    rows: &[usize],
    method: Method,
    horizon_ns: u64,
) -> CurveReport {
    let observations: Vec<Observation> = rows
        .iter()
        .filter_map(|&row| {
            let fate = match requests.outcome(row)? {
                Outcome::Completed => Fate::Completed,
                Outcome::Errored => Fate::Errored,
                Outcome::Censored => Fate::Censored,
                Outcome::Undispatched => return None,
            };
            Some(Observation {
                time_ns: requests.terminal_ns[row].saturating_sub(requests.intended_ns[row]),
                fate,
            })
        })
        .collect();
    let curve = CompletionCurve::estimate(&observations, method);
    let tolerance = pins::float("analysis.crossing_tolerance");
    let readings = QUANTILES
        .iter()
        .map(|&q| {
            let reading = quantile::read(&curve, q, horizon_ns, tolerance);
            let (kind, seconds_at) = match reading {
                quantile::Reading::At { time_ns } => ("at", Some(seconds(time_ns))),
                quantile::Reading::AboveHorizon { .. } => ("above-horizon", None),
                quantile::Reading::Unattainable { .. } => ("unattainable", None),
            };
            Reading {
                quantile: quantile::name(q),
                kind,
                seconds: seconds_at,
                text: quantile::render(q, reading, horizon_ns),
            }
        })
        .collect();
    let grid = (1..=CURVE_GRID_POINTS)
        .map(|k| {
            let t = horizon_ns / CURVE_GRID_POINTS * k;
            let at_risk = curve
                .steps
                .iter()
                .find(|s| s.time_ns > t)
                .map_or(0, |s| s.at_risk);
            CurvePoint {
                t_s: seconds(t),
                incidence: curve.at(t),
                at_risk,
            }
        })
        .collect();
    CurveReport {
        method: match method {
            Method::AalenJohansen => "Aalen-Johansen (v0.2)",
            Method::KaplanMeierErrorsCensored => "Kaplan-Meier, errors censored (v0.1)",
        },
        label: "over all scheduled requests of the window (undispatched excluded)",
        n: curve.n,
        horizon_s: seconds(horizon_ns),
        final_incidence: curve.final_incidence(),
        ceiling: curve.ceiling(),
        within_1s: curve.at(1_000_000_000),
        readings,
        grid,
    }
}

/// A completed-only distribution: percentiles from the pinned histogram, tails from the exact
/// order statistics. `us_samples` are already microseconds (the inter-chunk gaps).
pub fn distribution(ns: &[u64], histogram: Option<LatencyHistogram>) -> Distribution {
    let mut sorted_us: Vec<u64> = ns
        .iter()
        .map(|&v| crate::estimate::histogram::ns_to_us(v))
        .collect();
    sorted_us.sort_unstable();
    let histogram = histogram.unwrap_or_else(|| {
        let mut h = LatencyHistogram::pinned();
        for &us in &sorted_us {
            h.record_us(us);
        }
        h
    });
    let n = histogram.len();
    let tails = if ns.is_empty() && n > 0 {
        Vec::new() // pooled gaps: no per-sample order statistics kept
    } else {
        TAIL_QUANTILES
            .iter()
            .map(|&p| tail(&sorted_us, p))
            .collect()
    };
    Distribution {
        label: CONDITIONAL,
        n,
        percentiles_us: if n == 0 {
            Vec::new()
        } else {
            QUANTILES
                .iter()
                .map(|&q| (quantile::name(q), histogram.quantile_us(q)))
                .collect()
        },
        p99_9_us: (n > 0).then(|| histogram.quantile_us(0.999)),
        max_us: (n > 0).then(|| histogram.max_us()),
        descriptive_only: "p99.9 and max are descriptive only (§7)",
        tails,
        saturated: histogram.saturated,
        histogram: Some(histogram),
    }
}

fn tail(sorted_us: &[u64], p: f64) -> Tail {
    let name = quantile::name(p);
    let n = sorted_us.len() as u64;
    let point_rank = (n as f64 * p).ceil() as u64;
    let point_us = (n > 0).then(|| sorted_us[point_rank.clamp(1, n) as usize - 1]);
    match tails::interval(sorted_us, p) {
        TailInterval::Interval { lower_rank, upper_rank, lower, upper } => Tail {
            text: format!(
                "{name} = {} us, 95 % CI [{lower}, {upper}] us (ranks {lower_rank} and {upper_rank} of {n}, §7)",
                point_us.unwrap_or_default()
            ),
            quantile: name,
            point_us,
            interval_us: Some((lower, upper)),
            ranks: Some((lower_rank, upper_rank)),
        },
        TailInterval::Omitted => Tail {
            text: tails::omitted_line(&name),
            quantile: name,
            point_us,
            interval_us: None,
            ranks: None,
        },
    }
}

/// The requests in flight at `fired_ns` (dispatched at or before it, terminal at or after it: a
/// request reset at the fire instant was in flight when it fired).
fn in_flight_at(run: &Run, fired_ns: u64) -> InFlight {
    let requests = &run.requests;
    let victim = run.config.fault.victim.clone().unwrap_or_default();
    let in_flight: Vec<usize> = (0..requests.len())
        .filter(|&row| {
            let d = requests.dispatched_ns[row];
            d != NONE && d <= fired_ns && requests.terminal_ns[row] >= fired_ns
        })
        .collect();
    let on = |pred: &dyn Fn(Option<&str>) -> bool| {
        count_outcomes(
            requests,
            in_flight
                .iter()
                .copied()
                .filter(|&row| pred(requests.replica_name(row))),
        )
    };
    InFlight {
        fired_s: seconds(fired_ns),
        on_victim: on(&|r| r == Some(victim.as_str())),
        on_survivors: on(&|r| r.is_some_and(|r| r != victim)),
        unattributed: on(&|r| r.is_none()),
        victim,
        note: "requests dispatched at or before the recorded fire and terminal at or after it; a request is attributed to the replica named by its response header".into(),
    }
}

/// The client-validity gate (§2) over the measured windows.
/// Send skew (dispatch minus intended, ns) of every dispatched request of the measured windows,
/// sorted: the gate and the audit read the same vector.
fn measured_skews(run: &Run, cut: &[Window], rows_of: &[Vec<usize>]) -> Vec<u64> {
    let requests = &run.requests;
    let mut skews: Vec<u64> = cut
        .iter()
        .zip(rows_of)
        .filter(|(w, _)| w.kind.measured())
        .flat_map(|(_, rows)| rows.iter().copied())
        .filter(|&row| requests.dispatched_ns[row] != NONE)
        .map(|row| requests.dispatched_ns[row].saturating_sub(requests.intended_ns[row]))
        .collect();
    skews.sort_unstable();
    skews
}

fn gates(run: &Run, cut: &[Window], skews: &[u64]) -> Validity {
    let requests = &run.requests;
    let ms = |key: &str| run.config.value(key).as_f64().unwrap_or(f64::NAN);
    let mut gates = Vec::new();
    let skew_p99 = nearest_rank(skews, 0.99);
    let skew_max = skews.last().copied();
    let limit_p99 = ms("gates.send_skew_p99_ms");
    let limit_max = ms("gates.send_skew_max_ms");
    gates.push(limit_gate(
        "G2.1 send skew p99",
        skew_p99.map(|v| v as f64 / 1e6),
        limit_p99,
        false,
        "ms",
        skews.len() as u64,
        "actual minus intended dispatch, every dispatched request of the measured windows",
    ));
    gates.push(limit_gate(
        "G2.1 send skew max",
        skew_max.map(|v| v as f64 / 1e6),
        limit_max,
        false,
        "ms",
        skews.len() as u64,
        "actual minus intended dispatch, every dispatched request of the measured windows",
    ));
    let undispatched_records = (0..requests.len())
        .filter(|&row| requests.outcome(row) == Some(Outcome::Undispatched))
        .count() as u64;
    let undispatched_telemetry = run
        .telemetry
        .rows
        .iter()
        .map(|t| t.undispatched_total)
        .max()
        .unwrap_or(0);
    let undispatched = undispatched_records.max(undispatched_telemetry);
    gates.push(limit_gate(
        "G2.2 undispatched requests",
        Some(undispatched as f64),
        ms("gates.undispatched_max"),
        false,
        "requests",
        requests.len() as u64,
        "scheduled but never sent, the whole run (records and the recorder's own count)",
    ));
    let span = measured_span(cut);
    let samples: Vec<_> = run
        .telemetry
        .rows
        .iter()
        .filter(|t| t.at_ns > span.0 && t.at_ns.saturating_sub(t.interval_ns) < span.1)
        .collect();
    let window_ns = run
        .config
        .value("gates.host_cpu_window_s")
        .as_f64()
        .unwrap_or(5.0)
        * 1e9;
    let cpu = max_windowed_cpu(&samples, window_ns as u64);
    gates.push(limit_gate(
        "G2.3 host CPU, every 5 s window",
        cpu.map(|c| c * 100.0),
        ms("gates.host_cpu_max_percent"),
        false,
        "%",
        samples.len() as u64,
        "busy share of all host cores (/proc/stat), mean over each run of consecutive samples spanning 5 s",
    ));
    let stall: Vec<_> = samples.iter().filter(|t| t.stall_samples > 0).collect();
    let stall_n: u64 = stall.iter().map(|t| u64::from(t.stall_samples)).sum();
    // The recorder's pooled p99 over the measured span when it wrote one (exact to 10 us, rounded
    // up); otherwise the highest per-second p99, an upper bound on the pooled one.
    let pooled = run
        .events
        .first("stall-summary")
        .and_then(|e| e.value)
        .and_then(|v| u64::try_from(v).ok());
    let (stall_p99, how) = match pooled {
        Some(p99) => (
            Some(p99),
            "the 1 ms ticker's lateness pooled over the measured span by the recorder (nearest-rank p99, rounded up to 10 us)",
        ),
        None => (
            stall.iter().map(|t| t.stall_p99_ns).max(),
            "the highest per-second p99 of the 1 ms ticker's lateness: an upper bound on the pooled p99 (if every second's p99 is under x, at most 1 % of all samples are above x); this journal has no pooled stall-summary",
        ),
    };
    gates.push(limit_gate(
        "G2.4 runtime stall p99",
        stall_p99.map(|v| v as f64 / 1e3),
        ms("gates.runtime_stall_p99_us"),
        true,
        "us",
        stall_n,
        how,
    ));
    Validity {
        valid: gates.iter().all(|g| g.status == "pass"),
        gates,
    }
}

/// Whether a gate's reading leaves the run valid: only a run-invalidating gate that failed or
/// went unobserved invalidates it.
pub fn gate_holds(gate: &Gate) -> bool {
    gate.effect != crate::gates::RUN_INVALIDATING
        || matches!(
            gate.status,
            "pass" | "not applicable" | "not evaluable" | "campaign-level"
        )
}

fn measured_span(cut: &[Window]) -> (u64, u64) {
    let measured: Vec<&Window> = cut.iter().filter(|w| w.kind.measured()).collect();
    (
        measured.first().map_or(0, |w| w.start_ns),
        measured.last().map_or(0, |w| w.end_ns),
    )
}

/// The highest mean busy share over runs of consecutive samples spanning at least `window_ns`
/// (or over all samples, when they span less). `None` with no samples.
fn max_windowed_cpu(
    samples: &[&percentes_formats::journal::records::TelemetryRecord],
    window_ns: u64,
) -> Option<f64> {
    let mean = |run: &[&percentes_formats::journal::records::TelemetryRecord]| {
        let busy: f64 = run
            .iter()
            .map(|t| f64::from(t.host_cpu_busy_ppm) / 1e6 * t.interval_ns as f64)
            .sum();
        let span: u64 = run.iter().map(|t| t.interval_ns).sum();
        (span > 0).then(|| busy / span as f64)
    };
    let total: u64 = samples.iter().map(|t| t.interval_ns).sum();
    if total < window_ns {
        // Shorter than one window: the whole span is the only window there is.
        return mean(samples);
    }
    let mut best: Option<f64> = None;
    for start in 0..samples.len() {
        let mut span = 0u64;
        let mut end = start;
        while end < samples.len() && span < window_ns {
            span += samples[end].interval_ns;
            end += 1;
        }
        if span < window_ns {
            break;
        }
        if let Some(m) = mean(&samples[start..end]) {
            best = Some(best.map_or(m, |b| b.max(m)));
        }
    }
    best
}

/// Nearest-rank quantile of sorted values.
fn nearest_rank(sorted: &[u64], q: f64) -> Option<u64> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((n as f64 * q).ceil() as usize).clamp(1, n) - 1])
}

fn limit_gate(
    gate: &str,
    observed: Option<f64>,
    limit: f64,
    strict: bool,
    unit: &str,
    n: u64,
    note: &str,
) -> Gate {
    let clause = "§2";
    let effect = crate::gates::RUN_INVALIDATING;
    let limit_text = format!("{} {limit} {unit}", if strict { "<" } else { "<=" });
    match observed {
        None => Gate {
            gate: gate.into(),
            clause,
            effect,
            status: "unobserved",
            limit: limit_text,
            observed: "not observed".into(),
            by: None,
            n,
            note: format!(
                "{note}; a gate that applies but was not observed counts as failed (§10)"
            ),
        },
        Some(value) => {
            let pass = if strict {
                value < limit
            } else {
                value <= limit
            };
            Gate {
                gate: gate.into(),
                clause,
                effect,
                status: if pass { "pass" } else { "fail" },
                limit: limit_text,
                observed: if unit == "requests" {
                    format!("{value} {unit}")
                } else {
                    format!("{value:.3} {unit}")
                },
                by: (!pass).then(|| {
                    if unit == "requests" {
                        format!("{} {unit} over", value - limit)
                    } else {
                        format!("{:.3} {unit} over", value - limit)
                    }
                }),
                n,
                note: note.into(),
            }
        }
    }
}

/// The coordinated-omission audit.
fn audit(run: &Run, cut: &[Window], skews_ns: &[u64], validity: &Validity) -> Audit {
    let requests = &run.requests;
    let n = requests.len() as u64;
    let count = |column: &[u64]| column.iter().filter(|&&v| v != NONE).count() as u64;
    let connected = (0..requests.len())
        .filter(|&r| requests.connect_end_ns[r] != NONE || requests.connection_reused[r])
        .count() as u64;
    let all = count_outcomes(requests, 0..requests.len());
    let stages = vec![
        ("scheduled".to_owned(), n),
        ("dispatched".to_owned(), count(&requests.dispatched_ns)),
        ("connected".to_owned(), connected),
        ("written".to_owned(), count(&requests.request_written_ns)),
        (
            "response head".to_owned(),
            count(&requests.response_head_ns),
        ),
        (
            "first content".to_owned(),
            count(&requests.first_content_ns),
        ),
        ("completed".to_owned(), all.completed),
        ("errored".to_owned(), all.errored),
        ("censored".to_owned(), all.censored),
        ("undispatched".to_owned(), all.undispatched),
        ("no record".to_owned(), all.no_record),
    ];
    let funnel_ok = stages[..6].windows(2).all(|w| w[1].1 <= w[0].1);
    let sum = all.completed + all.errored + all.censored + all.undispatched + all.no_record;
    let dispatched_ok = stages[1].1 + all.undispatched + all.no_record >= n;
    let reconciled = funnel_ok && sum == n && dispatched_ok;
    let reconciliation = format!(
        "completed {} + errored {} + censored {} + undispatched {} + no record {} = {sum} of {n} scheduled; each stage at most the one before: {}",
        all.completed, all.errored, all.censored, all.undispatched, all.no_record,
        if funnel_ok { "yes" } else { "NO" }
    );

    let q = |p| nearest_rank(skews_ns, p).unwrap_or(0) / 1000;
    let skew_us = SkewSummary {
        n: skews_ns.len() as u64,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p99_9: q(0.999),
        max: skews_ns.last().copied().unwrap_or(0) / 1000,
    };

    let params = &run.header.schedule;
    let poisson = matches!(
        params.arrival,
        percentes_formats::schedule::Arrival::Poisson
    );
    let mut phases = Vec::new();
    for (p, phase) in params.phases.iter().enumerate() {
        let rows: Vec<usize> = (0..requests.len())
            .filter(|&r| requests.phase[r] == p as u32)
            .collect();
        let intended: Vec<u64> = rows.iter().map(|&r| requests.intended_ns[r]).collect();
        let mut dispatched: Vec<u64> = rows
            .iter()
            .map(|&r| requests.dispatched_ns[r])
            .filter(|&d| d != NONE)
            .collect();
        dispatched.sort_unstable();
        let gaps = |times: &[u64]| -> Vec<f64> {
            times.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
        };
        let scheduled_gaps = gaps(&intended);
        let dispatched_gaps = gaps(&dispatched);
        let target_mean_ns = 1e9 / phase.rate_rps;
        let duration_s = seconds(phase.duration_ns);
        phases.push(PhaseRate {
            phase: phase.name.clone(),
            duration_s,
            requested_rps: phase.rate_rps,
            scheduled: rows.len() as u64,
            dispatched: dispatched.len() as u64,
            achieved_rps: if duration_s > 0.0 {
                dispatched.len() as f64 / duration_s
            } else {
                0.0
            },
            target_mean_gap_ms: target_mean_ns / 1e6,
            target_cv: if poisson { 1.0 } else { 0.0 },
            scheduled_mean_gap_ms: mean(&scheduled_gaps).map(|m| m / 1e6),
            scheduled_cv: cv(&scheduled_gaps),
            dispatched_mean_gap_ms: mean(&dispatched_gaps).map(|m| m / 1e6),
            dispatched_cv: cv(&dispatched_gaps),
            dispatched_ks: ks_distance(&dispatched_gaps, target_mean_ns, poisson),
        });
    }

    let telemetry = telemetry_summary(run, cut);
    let failed: Vec<&str> = validity
        .gates
        .iter()
        .filter(|g| g.gate.starts_with("G2") && g.status != "pass")
        .map(|g| g.gate.as_str())
        .collect();
    let decision = if !failed.is_empty() || !reconciled || telemetry.writer_queue_full_events > 0 {
        let mut why: Vec<String> = failed.iter().map(|g| format!("{g} did not pass")).collect();
        if !reconciled {
            why.push("the stage counts do not reconcile".into());
        }
        if telemetry.writer_queue_full_events > 0 {
            why.push(format!(
                "the journal writer's queue filled {} times",
                telemetry.writer_queue_full_events
            ));
        }
        format!("rerun required: {}", why.join("; "))
    } else if !run.not_publishable.is_empty() {
        format!(
            "descriptive only: the generator kept its schedule, but {}",
            run.not_publishable.join("; ")
        )
    } else {
        "representative: every request was sent on its schedule within the gate, every stage reconciles, and the generator's telemetry passed".into()
    };
    Audit {
        workload_model: format!(
            "open loop: {} arrivals on a schedule fixed before the first send (seed {}, digest in the header); latency measured from each request's intended send time; zero retries; client timeout {:.3} s",
            if poisson { "Poisson" } else { "deterministic" },
            params.seed,
            seconds(run.config.duration_ns("client.timeout_s")),
        ),
        clock_model: format!(
            "CLOCK_MONOTONIC, ns from the epoch ({}); every timestamp on the recording host's one clock",
            run.header.clock.source
        ),
        stages,
        reconciled,
        reconciliation,
        skew_us,
        phases,
        telemetry,
        decision,
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn cv(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    if values.len() < 2 || m == 0.0 {
        return None;
    }
    let var = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    Some(var.sqrt() / m)
}

/// Kolmogorov-Smirnov distance of `gaps` from the exponential law of mean `mean_ns` (Poisson), or
/// from the point mass at `mean_ns` (deterministic).
fn ks_distance(gaps: &[f64], mean_ns: f64, poisson: bool) -> Option<f64> {
    if gaps.is_empty() {
        return None;
    }
    let mut sorted = gaps.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let cdf = |x: f64| {
        if poisson {
            1.0 - (-x / mean_ns).exp()
        } else if x >= mean_ns {
            1.0
        } else {
            0.0
        }
    };
    let mut d = 0.0f64;
    for (i, &x) in sorted.iter().enumerate() {
        let f = cdf(x);
        d = d.max((i as f64 + 1.0) / n - f).max(f - i as f64 / n);
    }
    Some(d)
}

fn telemetry_summary(run: &Run, cut: &[Window]) -> TelemetrySummary {
    let span = measured_span(cut);
    let samples: Vec<_> = run
        .telemetry
        .rows
        .iter()
        .filter(|t| t.at_ns > span.0 && t.at_ns.saturating_sub(t.interval_ns) < span.1)
        .collect();
    let cpu_ns: u64 = samples.iter().map(|t| t.recorder_cpu_ns).sum();
    let wall_ns: u64 = samples.iter().map(|t| t.interval_ns).sum();
    TelemetrySummary {
        samples: samples.len() as u64,
        host_cpu_max_5s_percent: max_windowed_cpu(&samples, 5_000_000_000).map(|c| c * 100.0),
        recorder_cpu_percent_of_one_core: (wall_ns > 0)
            .then(|| cpu_ns as f64 / wall_ns as f64 * 100.0),
        stall_p99_max_us: samples
            .iter()
            .filter(|t| t.stall_samples > 0)
            .map(|t| t.stall_p99_ns)
            .max()
            .map(|v| v as f64 / 1e3),
        stall_max_us: samples
            .iter()
            .filter(|t| t.stall_samples > 0)
            .map(|t| t.stall_max_ns)
            .max()
            .map(|v| v as f64 / 1e3),
        writer_queue_max: run
            .telemetry
            .rows
            .iter()
            .map(|t| u64::from(t.writer_queue_max))
            .max()
            .unwrap_or(0),
        writer_queue_full_events: run.events.all("writer-queue-full").count() as u64,
        undispatched_total: run
            .telemetry
            .rows
            .iter()
            .map(|t| t.undispatched_total)
            .max()
            .unwrap_or(0),
    }
}

/// Whether the variant and target make a fault analysis applicable (for callers that label).
pub fn has_fault(run: &Run) -> bool {
    run.config.fault.variant != FaultVariant::None && run.config.target.kind != TargetKind::Hosted
}

#[cfg(test)]
mod tests;
