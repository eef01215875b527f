//! The report of one run (`report.json`): what `percentes analyze` writes, field by field.

use serde::Serialize;

use super::{CleanupReport, EscapeReport, Gate, RecoveryReport};
use crate::estimate::histogram::LatencyHistogram;

/// The report schema this build writes; bumped on any change a reader would notice.
pub const REPORT_SCHEMA: &str = "percentes-report/1";

/// Who analyzed (the caller's version and commit: the binary knows its own build), and whether
/// for diagnosis.
#[derive(Clone, Debug, Default)]
pub struct Analyzer {
    /// The analyzer's version.
    pub version: String,
    /// The commit it was built from.
    pub commit: String,
    /// Compute the statistics an invalid run withholds, for diagnosis (`analyze --diagnose`):
    /// the run stays invalid, and the report says NOT PUBLISHABLE and why (§9). A valid run's
    /// report is the same either way.
    pub diagnose: bool,
    /// Segment each window by these columns (`analyze --by`); none by default.
    pub by: Vec<super::SegmentColumn>,
}

/// The analysis of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The report schema ([`REPORT_SCHEMA`]).
    pub schema: &'static str,
    /// What the report cites: versions, hashes, the journal's verdict, the profile.
    pub provenance: Provenance,
    /// Empty when the results may be published; otherwise every reason, each starting
    /// `NOT PUBLISHABLE`.
    pub not_publishable: Vec<String>,
    /// Every gate's reading, and whether the run is valid.
    pub validity: Validity,
    /// The fire, the recovery boundary and the windows' bounds.
    pub timeline: TimelineReport,
    /// Per-window statistics; empty when a run-invalidating gate failed (§9: nothing published).
    pub windows: Vec<WindowReport>,
    /// Why `windows` is empty, when it is.
    pub windows_withheld: Option<String>,
    /// Each window's segments by the columns `analyze --by` named (absent without it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<super::SegmentReport>,
    /// Why segments asked for are not in the report (withheld with the windows, or too many).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segments_note: Option<String>,
    /// The requests in flight at the fire, by where they were served (§3).
    pub in_flight_at_fire: Option<InFlight>,
    /// The §5 recovery analysis of a fault run (withheld with the windows when invalid).
    pub recovery: Option<RecoveryReport>,
    /// The cleanup verdict of a fault run that fired (seeds/004): never withheld.
    pub cleanup: Option<CleanupReport>,
    /// What an escaped experiment's report keeps (seeds/004): never withheld.
    pub escape: Option<EscapeReport>,
    /// A4 (v0.5): a run stopped before its schedule's end, and the requests it never sent,
    /// which every window's figures leave out; absent for a run that sent its whole schedule
    /// and under v0.1 to v0.4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StoppedReport>,
    /// A4 (v0.5): the testbed change the run's timeline holds (a rollout, a rollback, a
    /// scale-out, a proxy failover; §10 "Reading a testbed change"), withheld with the windows;
    /// absent for a run without one and under v0.1 to v0.4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<super::ChangeReport>,
    /// The server's own metrics beside the client's (§2 "Server-side evidence"); absent for
    /// a journal without scrapes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<super::ServerEvidence>,
    /// The appendix's headline sentence filled from this run alone (empty slots say
    /// `[not measured]`); `percentes campaign` fills it over five runs.
    pub headline: String,
    /// The coordinated-omission audit (seeds/003).
    pub audit: Audit,
    /// The rules of the spec version applied (`provenance.spec_applied`), for what is read
    /// from this report afterwards (the headline, a campaign's scalars); not written.
    #[serde(skip)]
    pub rules: percentes_formats::spec::Rules,
    /// The run's workload model (§1), for what is read from this report afterwards (the
    /// summary's first line); not written: the audit says it in words.
    #[serde(skip)]
    pub workload: percentes_formats::schedule::Workload,
    /// What each turn resent of its session's earlier turns, where the workload declares it
    /// (§1 "Conversation histories"), for the same line; not written.
    #[serde(skip)]
    pub history: Option<percentes_formats::schedule::History>,
    /// What the run was, for the page's first lines (issue 54 item 5); not written: the
    /// provenance and the audit hold it.
    #[serde(skip)]
    pub identity: Identity,
}

/// What the report cites (§9).
#[derive(Clone, Debug, Serialize)]
pub struct Provenance {
    /// The spec version whose rules this report applies.
    pub spec_applied: String,
    /// The spec version the journal was captured under.
    pub spec_at_capture: String,
    /// The completion curve's estimator, in words.
    pub curve_method: String,
    /// The analyzer's version.
    pub analyzer_version: String,
    /// The analyzer's commit.
    pub analyzer_commit: String,
    /// The recorder's version, from the journal header.
    pub recorder_version: String,
    /// The recorder's commit, from the journal header.
    pub recorder_commit: String,
    /// BLAKE3 of the configuration, hex.
    pub config_hash: String,
    /// The journal's chain head, hex; for a run merged from shards, the manifest's binding, which
    /// binds every shard's head (listed in `shard_heads`).
    pub chain_head: String,
    /// A merged run's shards as `K/N HEAD`, in index order; absent for one journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_heads: Option<Vec<String>>,
    /// `percentes verify`'s verdict on the journal.
    pub journal_verdict: String,
    /// What the trusted head or key given to `analyze` (`--expect-head`, `--pubkey`) vouched
    /// for; absent when none was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vouched: Option<String>,
    /// The seal's status and reason, or that there is none; a merged run's shards', each named
    /// `k/N` when they differ.
    pub seal: String,
    /// The schedule's digest, hex.
    pub schedule_digest: String,
    /// The configuration's profile.
    pub profile: String,
    /// The dev time factor (1 outside the dev profile).
    pub dev_time_factor: u32,
    /// `mock`, `self-hosted` or `hosted`.
    pub target_kind: String,
    /// The fault variant.
    pub fault_variant: String,
    /// Printed in every report when certificate verification was off.
    pub tls_insecure: bool,
}

/// The client-validity gate (§2), gate by gate.
#[derive(Clone, Debug, Serialize)]
pub struct Validity {
    /// Whether every run-invalidating gate held.
    pub valid: bool,
    /// The gates, in report order.
    pub gates: Vec<Gate>,
    /// Where the requests G2.1 found late spent their lateness, when G2.1 failed and some of
    /// them began on time and waited for their connection (issue 50): absent otherwise, as in
    /// every report before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_sends: Option<LateSends>,
}

/// The requests ready to send later than G2.1's p99 limit, by where the time went: begun late
/// (their dispatch, or their connect, came late: the client's), or begun on time and waiting for
/// their connection (a SYN-ACK, a TLS handshake: the target's or the network's answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LateSends {
    /// Ready to send later than the limit.
    pub late: u64,
    /// Of those, begun later than the limit: the client's lateness.
    pub began_late: u64,
    /// Of those, begun in time and waiting for their connect or TLS handshake.
    pub waited_on_connection: u64,
}

impl LateSends {
    /// Whether the lateness is mostly the connection's, not the client's.
    pub fn mostly_connection(&self) -> bool {
        self.waited_on_connection > self.began_late
    }
}

impl Validity {
    /// The gates that did not hold, in the report's order.
    pub fn failed(&self) -> impl Iterator<Item = &Gate> {
        self.gates.iter().filter(|g| !g.holds())
    }

    /// Whether every gate that did not hold is one of the client's own (G2): a run a busy
    /// client spoiled, which says nothing about the target. True for a valid run.
    pub fn only_client_gates_failed(&self) -> bool {
        self.failed().all(|g| g.id.is_client_gate())
    }
}

/// The windows and the instants they were cut at (§3).
#[derive(Clone, Debug, Serialize)]
pub struct TimelineReport {
    /// T_inject, s from the epoch, in a fault run.
    pub inject_s: Option<f64>,
    /// The recorded fire, s from the epoch, when it fired.
    pub fired_s: Option<f64>,
    /// The earlier of T_inject and the fire (§3).
    pub fire_anchor_s: Option<f64>,
    /// The recovery boundary (end of the detector window that entered recovery to the pre-fault
    /// baseline), or why there is none.
    pub recovered_s: Option<f64>,
    /// How the recovery boundary was found, or why there is none.
    pub recovery_note: String,
    /// Each window's bounds and size.
    pub windows: Vec<WindowBounds>,
}

#[derive(Clone, Debug, Serialize)]
/// One window's bounds.
pub struct WindowBounds {
    /// Its name (`baseline`, `guard`, `fault`, ...).
    pub window: &'static str,
    /// Its start, s from the epoch.
    pub start_s: f64,
    /// Its end, s from the epoch.
    pub end_s: f64,
    /// Requests scheduled in it (by intended time).
    pub scheduled: u64,
    /// Its start in ns from the epoch, exactly (not in report.json: `start_s` is).
    #[serde(skip)]
    pub start_ns: u64,
    /// Its end in ns from the epoch, exactly (not in report.json: `end_s` is).
    #[serde(skip)]
    pub end_ns: u64,
}

/// A count or share with its n and label.
#[derive(Clone, Debug, Serialize)]
pub struct Share {
    /// The share or rate; `None` when its denominator is empty.
    pub value: Option<f64>,
    /// Its denominator.
    pub n: u64,
    /// What it is over.
    pub label: &'static str,
}

/// Everything one window reports.
#[derive(Clone, Debug, Serialize)]
pub struct WindowReport {
    /// Its name.
    pub window: &'static str,
    /// Its start, s from the epoch.
    pub start_s: f64,
    /// Its end, s from the epoch.
    pub end_s: f64,
    /// Requests scheduled in it (by intended time).
    pub scheduled: u64,
    /// How they ended.
    pub outcomes: Outcomes,
    /// Count per response class, by class name.
    pub classes: std::collections::BTreeMap<String, u64>,
    /// Errored over scheduled.
    pub error_rate: Share,
    /// Censored over scheduled.
    pub censored_rate: Share,
    /// Completions per second of the window.
    pub throughput_rps: Share,
    /// Requests that met the SLO over scheduled (§4).
    pub goodput: Share,
    /// Goodput at the 3 x 3 thresholds (§4): rows TTFT 800/1000/1500 ms, columns e2e 12/14/18 s.
    pub goodput_sweep: Vec<SweepCell>,
    /// The completion curve and the readings taken from it.
    pub completion: CurveReport,
    /// Time to first token, completed requests only.
    pub ttft: Distribution,
    /// End-to-end latency, completed requests only.
    pub e2e: Distribution,
    /// Pooled inter-chunk gaps of the completed streams.
    pub inter_chunk: Distribution,
    /// The share of those gaps at the 1 us floor (§3): events the recorder read together, whose
    /// gap it cannot resolve, so a pooled percentile at 1 us is the floor, not a measurement.
    /// v0.3 reports only: the archived versions' reports stay as published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inter_chunk_at_floor: Option<Share>,
    /// Token figures of the completed requests, from the usage the server reported.
    pub tokens: TokenReport,
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
    /// A4 (v0.5): what the completed requests' streams carried, by kind, and how it arrived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamFigures>,
    /// A4 (v0.5): where the completed requests' time to first token went (SPEC §2 "The first
    /// token's path").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_token_path: Option<super::FirstTokenPath>,
    /// A4 (v0.5): the pinned SLO's goodput's 95 % interval (SPEC §4, §7).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput_interval: Option<ShareInterval>,
    /// A4 (v0.5): goodput under the SLO the configuration declares (SPEC §4 "A declared SLO"),
    /// where it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_goodput: Option<DeclaredGoodput>,
    /// A4 (v0.5): the prefix reuse the workload's shared-prefix pool designed for the window's
    /// requests (SPEC §1 "Shared prefixes"), where it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_reuse: Option<super::DesignedReuse>,
    /// A4 (v0.5): the schedule's abandonment in the window (SPEC §1 "Abandonment"), where it
    /// declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abandonment: Option<AbandonReport>,
}

/// A4 (v0.5): a goodput's 95 % interval (SPEC §4): Wilson's score interval on the met count
/// read at its design effect from the window's outcomes in intended-time order (§7).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ShareInterval {
    /// The interval's ends, shares; absent where refused.
    pub interval: Option<(f64, f64)>,
    /// n / n_eff of the met series (1 where nothing shows a correlation).
    pub n_per_effective: Option<f64>,
    /// Why there is no interval.
    pub refused: Option<String>,
}

/// A4 (v0.5): goodput under the user's declared SLO (SPEC §4 "A declared SLO").
#[derive(Clone, Debug, Serialize)]
pub struct DeclaredGoodput {
    /// The objectives, as the configuration declares them (`ttft<=500ms, tpot<=50ms; route
    /// chat: ttft<=300ms`).
    pub slo: String,
    /// Requests that met every objective of their route, over all scheduled.
    pub goodput: Share,
    /// Its 95 % interval.
    pub interval: ShareInterval,
    /// Completed requests that could not be judged on an objective's metric (no usage for
    /// TPOT, no answer for the first answer token, a stream listed in part for the longest
    /// gap), by metric: counted as not meeting the SLO, never guessed.
    pub unjudged: std::collections::BTreeMap<String, u64>,
}

/// A4 (v0.5): a window's stream figures (SPEC §3 "What a stream's figures are about"): the
/// completed requests by the kinds of output they carried, the time to their first answer
/// token, their reasoning, and how their deltas were delivered.
#[derive(Clone, Debug, Serialize)]
pub struct StreamFigures {
    /// Completed requests by the kinds of output they carried (`answer`, `answer+reasoning`,
    /// `tool-call`, ...; `none` for a response with no generated output).
    pub output: std::collections::BTreeMap<String, u64>,
    /// Completed requests the journal holds a stream record for (kind 8); the others' first
    /// token is their first answer content event (a journal recorded before 2026-12-05).
    pub with_record: u64,
    /// Time to first answer token from t_i: completed requests whose answer came.
    pub ttfat: Distribution,
    /// The reasoning span, first reasoning delta to last: completed requests that reasoned.
    pub reasoning_span: Distribution,
    /// The usage's reasoning tokens: completed requests that reported them.
    pub reasoning_tokens: Counts,
    /// The reasoning deltas against the usage's reasoning tokens, over the requests that have
    /// both, in words.
    pub reasoning_reconciled: String,
    /// Deliveries (reads that brought new deltas) of the completed streams.
    pub deliveries: u64,
    /// Deltas of every kind those deliveries carried.
    pub deltas: u64,
    /// Deltas a delivery carried.
    pub deltas_per_delivery: Counts,
    /// Whether each delta carried one token, from the usage: `Some(true)` when every completed
    /// request with usage counted as many tokens as deltas.
    pub one_token_per_delta: Option<bool>,
    /// The figures in words: what the inter-token figure is, and what it could not resolve.
    pub text: String,
}

impl StreamFigures {
    /// The reasoning tokens' reading in words, `None` when no completed request reported any.
    pub fn reasoning_tokens_line(&self) -> Option<String> {
        let c = &self.reasoning_tokens;
        (c.n > 0).then(|| {
            let ranks: Vec<String> = c
                .percentiles
                .iter()
                .map(|(q, v)| format!("{q} {v}"))
                .collect();
            format!(
                "{} in all over {} requests, {}, max {}",
                c.total,
                c.n,
                ranks.join(", "),
                c.max.unwrap_or(0)
            )
        })
    }
}

/// A distribution of counts (tokens, deltas) by nearest rank.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counts {
    /// Samples.
    pub n: u64,
    /// Their sum.
    pub total: u64,
    /// p50, p90, p95 and p99 by nearest rank.
    pub percentiles: Vec<(String, u64)>,
    /// The largest.
    pub max: Option<u64>,
}

/// The loopback canary's reading over one window (SPEC §2 receive-path caveat): the recorder
/// streamed itself events of known timing through the same read loop as the responses, and
/// journaled each second's lag (seen minus written) as a `canary` event.
#[derive(Clone, Debug, Serialize)]
pub struct ReceivePath {
    /// Canary summaries (one a second) whose second overlaps the window.
    pub canary_seconds: u64,
    /// Lag samples in those seconds.
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
/// How a set of scheduled requests ended.
pub struct Outcomes {
    /// Completed.
    pub completed: u64,
    /// Errored.
    pub errored: u64,
    /// Censored.
    pub censored: u64,
    /// Never dispatched (a failure of the run, §2).
    pub undispatched: u64,
    /// Scheduled but absent from an unsealed or cut-off journal.
    pub no_record: u64,
    /// A4 (v0.5): closed by the client at the instant the schedule's abandonment drew (SPEC §1
    /// "Abandonment"); not among `censored` (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub abandoned: u64,
}

/// Whether a count is 0 (serde leaves such a count out, so reports without it stay as they
/// were).
pub fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A4 (v0.5): what the schedule's abandonment did in a window (SPEC §1 "Abandonment").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AbandonReport {
    /// Requests the schedule marked for abandonment.
    pub marked: u64,
    /// Of those, closed by the client at their instant.
    pub abandoned: u64,
    /// Of those, ended before their instant (completed, errored or censored first).
    pub ended_first: u64,
}

impl Report {
    /// Whether the run finished its schedule: every journal of it sealed `completed`. An
    /// aborted, escaped or unsealed run publishes nothing, whatever its gates say, and
    /// `analyze` exits 2 for it (SPEC §10 "Exit codes").
    pub fn finished(&self) -> bool {
        self.provenance.seal == percentes_formats::journal::records::SealStatus::Completed.name()
    }

    /// Whether the run can pass at all (exit 0 or 3, never 2): its gates hold and it finished
    /// its schedule.
    pub fn may_pass(&self) -> bool {
        self.validity.valid && self.finished()
    }
}

/// A run stopped before its schedule's end (§3 "A run stopped before its end", A4).
#[derive(Clone, Debug, Serialize)]
pub struct StoppedReport {
    /// The stop: the first unsent request's intended time, seconds from the epoch.
    pub at_s: f64,
    /// Requests the run stopped before sending: journaled censored, class `run-end`, never
    /// dispatched; in no window's figures.
    pub not_sent: u64,
    /// Requests scheduled before the stop: what the windows' figures are over.
    pub scheduled_before: u64,
    /// The sentence every output opens with.
    pub said: String,
}

/// One route's share of a window.
#[derive(Clone, Debug, Serialize)]
pub struct RouteSegment {
    /// The route's label.
    pub route: String,
    /// Its requests scheduled in the window.
    pub scheduled: u64,
    /// How they ended.
    pub outcomes: Outcomes,
    /// Terminal classes, by name.
    pub classes: std::collections::BTreeMap<String, u64>,
    /// HTTP statuses of the requests that got a response head.
    pub statuses: std::collections::BTreeMap<u16, u64>,
    /// Errored over scheduled.
    pub error_rate: Option<f64>,
    /// Completed-only end-to-end latency, nearest rank, in microseconds.
    pub e2e_p95_us: Option<u64>,
    /// Completed-only end-to-end p99, nearest rank, us.
    pub e2e_p99_us: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
/// One cell of the §4 goodput sweep.
pub struct SweepCell {
    /// The TTFT threshold.
    pub ttft_ms: u64,
    /// The end-to-end threshold.
    pub e2e_ms: u64,
    /// Goodput at these thresholds.
    pub goodput: Option<f64>,
    /// Requests scheduled in the window.
    pub n: u64,
}

/// The completion curve of a window and the readings taken from it.
#[derive(Clone, Debug, Serialize)]
pub struct CurveReport {
    /// `Aalen-Johansen (v0.2)` or `Kaplan-Meier, errors censored (v0.1)`.
    pub method: &'static str,
    /// What the curve is over, in words.
    pub label: &'static str,
    /// Requests on the curve (every scheduled request of the window).
    pub n: u64,
    /// The censoring horizon (the client timeout).
    pub horizon_s: f64,
    /// The curve's last value.
    pub final_incidence: f64,
    /// The highest the curve could reach: the final incidence plus what was still outstanding (§3).
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
/// One quantile read from the curve.
pub struct Reading {
    /// Which quantile (`p50`, `p99`, ...).
    pub quantile: String,
    /// `at`, `above-horizon`, `unattainable`, or (A4) `refused` below §7's sample budget.
    pub kind: &'static str,
    /// The latency, when the curve crosses the quantile inside the horizon.
    pub seconds: Option<f64>,
    /// The reading in §3's words.
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
/// The curve at one latency.
pub struct CurvePoint {
    /// The latency, s from t_i.
    pub t_s: f64,
    /// The incidence of completion by then.
    pub incidence: f64,
    /// Requests still at risk then.
    pub at_risk: u64,
}

/// A completed-only latency distribution.
#[derive(Clone, Debug, Serialize)]
pub struct Distribution {
    /// What the sample is, in words (always conditional on completion).
    pub label: &'static str,
    /// Samples.
    pub n: u64,
    /// From the pinned histogram, microseconds (three significant figures).
    pub percentiles_us: Vec<(String, u64)>,
    /// p99.9 and max: descriptive only (§7).
    pub p99_9_us: Option<u64>,
    /// The largest sample, us (descriptive only, §7).
    pub max_us: Option<u64>,
    /// Says p99.9 and max are descriptive only.
    pub descriptive_only: &'static str,
    /// Order-statistic intervals (§7), exact values, or the refusal line.
    pub tails: Vec<Tail>,
    /// Samples above the histogram's highest trackable value, counted at it.
    pub saturated: u64,
    /// Quantiles refused, each with its reason, and left out of `percentiles_us` (A4: an
    /// inter-token quantile at the read's resolution). Absent from reports before v0.5.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<(String, String)>,
    #[serde(skip)]
    /// The histogram itself, for the interval log (not serialized).
    pub histogram: Option<LatencyHistogram>,
}

/// What a run was, as a reader first asks it: where, what, how hard, when.
#[derive(Clone, Debug, Default)]
pub struct Identity {
    /// The target's base URL.
    pub target: String,
    /// The model asked for.
    pub model: String,
    /// The workload model and its arrival law, in words.
    pub workload: String,
    /// The configured offered rate, requests per second.
    pub rate_rps: f64,
    /// When the run started, ns since the Unix epoch (the recorder's realtime clock).
    pub started_unix_ns: i64,
}

#[derive(Clone, Debug, Serialize)]
/// A tail quantile with its order-statistic interval, or the refusal (§7).
pub struct Tail {
    /// Which quantile (`p95`, `p99`).
    pub quantile: String,
    /// Exact order statistic at rank ceil(np), us.
    pub point_us: Option<u64>,
    /// The two-sided 95 % interval, us, when the sample supports it.
    pub interval_us: Option<(u64, u64)>,
    /// The interval's ranks in the sorted sample.
    pub ranks: Option<(u64, u64)>,
    /// The interval or the exact refusal line.
    pub text: String,
    /// A4 (v0.5): what the interval rests on when the samples are correlated. Absent from
    /// reports before v0.5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective: Option<EffectiveTail>,
}

impl Tail {
    /// A4 (v0.5): what the interval rests on, as it follows the ranks (`; n/n_eff 1.84, ...`);
    /// empty before v0.5.
    pub fn beside(&self) -> String {
        self.effective
            .as_ref()
            .map(|e| format!("; {}", e.words))
            .unwrap_or_default()
    }
}

#[derive(Clone, Debug, Serialize)]
/// A4 (v0.5): a tail's effective sample size (§7): the completed requests' exceedances of the
/// quantile, in intended-time order, read by Geyer's initial positive sequence.
pub struct EffectiveTail {
    /// The effective n (at most n); absent where the correlation outlasted the longest lag read
    /// (`statistics.tail_lag_max`).
    pub n_eff: Option<f64>,
    /// n / n_eff: how much wider than §7's independent interval this one is sized, squared.
    pub ratio: Option<f64>,
    /// Autocovariance pairs the estimate added (how far the correlation reached).
    pub pairs: usize,
    /// The shares above the quantile in the window's first and second halves.
    pub halves: (f64, f64),
    /// Their difference over its standard error at the effective n.
    pub halves_z: Option<f64>,
    /// Whether the halves differ at 95 %: the window moved, and its quantile describes a mixture.
    pub halves_differ: bool,
    /// The words printed after the interval or in the refusal.
    pub words: String,
}

#[derive(Clone, Debug, Serialize)]
/// How far the fault window's modal latency is from one threshold (§4).
pub struct ModalDistance {
    /// Which latency (`ttft` or `e2e`).
    pub latency: &'static str,
    /// The threshold.
    pub threshold_ms: u64,
    /// The fault window's modal latency.
    pub mode_ms: Option<f64>,
    /// The baseline's standard deviation of that latency.
    pub baseline_sd_ms: Option<f64>,
    /// In baseline standard deviations; positive when the mode is under the threshold. JSON has
    /// no infinity, so a zero SD gives the text `+inf` or `-inf`.
    pub distance: String,
}

/// In-flight loss accounting at fire (§3), split by where each request was served.
#[derive(Clone, Debug, Serialize)]
pub struct InFlight {
    /// The fire, s from the epoch.
    pub fired_s: f64,
    /// The replica the fault took out.
    pub victim: String,
    /// Requests in flight on the victim.
    pub on_victim: Outcomes,
    /// Requests in flight on the other replicas.
    pub on_survivors: Outcomes,
    /// In flight but never attributed (no response header reached the client).
    pub unattributed: Outcomes,
    /// A4 (v0.5): in flight on the lost replica as G3 reads it, the victim's and the never
    /// answered together: what the in-flight shares rest on. Absent before v0.5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_lost: Option<Outcomes>,
    /// What the split means, in words.
    pub note: String,
}

/// The coordinated-omission audit (seeds/003).
#[derive(Clone, Debug, Serialize)]
pub struct Audit {
    /// The workload model (open loop, and its arrival law).
    pub workload_model: String,
    /// The clock model (what each timestamp is, from which clock).
    pub clock_model: String,
    /// Scheduled -> dispatched -> connected -> written -> response head -> first content ->
    /// terminal outcomes, over the whole schedule.
    pub stages: Vec<(String, u64)>,
    /// Whether every stage count is at most the one before and the outcomes sum to scheduled.
    pub reconciled: bool,
    /// Why the stage counts do or do not reconcile.
    pub reconciliation: String,
    /// Send skew (dispatch minus intended), measured windows, us.
    pub skew_us: SkewSummary,
    /// Requested against achieved, per schedule phase.
    pub phases: Vec<PhaseRate>,
    /// The recorder's own telemetry over the measured span.
    pub telemetry: TelemetrySummary,
    /// `representative`, `descriptive only` or `rerun required`, with why.
    pub decision: String,
    /// v0.3 (A2): seeds/003's required audit artifact, field by field. Absent under v0.1 and v0.2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
}

/// Seeds/003's "Required audit artifact", every field filled from the journal (v0.3).
#[derive(Clone, Debug, Serialize)]
pub struct Artifact {
    /// Target workload: the model, and the evidence this run gives for it.
    pub workload: String,
    /// Clock model: every timestamp the journal keeps per request, and its clock.
    pub clock: String,
    /// Stage counts, scheduled through each terminal outcome, in one line.
    pub stages: String,
    /// Generator: version, configuration hash, workers, connections opened and at peak, clock
    /// source, canary.
    pub generator: String,
    /// Which HTTP version carried the load (`target.http`, and what each request records).
    pub protocol: String,
    /// Schedule: target against empirical inter-arrivals, and the lag and drop policy.
    pub schedule: String,
    /// Results: the raw distributions, and that no correction was applied.
    pub results: String,
    /// Threats, each with what this run shows.
    pub threats: Vec<Threat>,
    /// How many requests of the measured windows waited for a connection before they could be
    /// sent, and how long (the wait is in their send skew under v0.3).
    pub connection_waits: Option<String>,
    /// The decision (as [`Audit::decision`]).
    pub decision: String,
}

/// One threat to a latency result (seeds/003) and what this run shows about it.
#[derive(Clone, Debug, Serialize)]
pub struct Threat {
    /// Response coupling, saturation, censoring, retries or shared bottlenecks.
    pub threat: &'static str,
    /// What this run shows.
    pub shows: String,
}

#[derive(Clone, Debug, Default, Serialize)]
/// Send skew quantiles, us (nearest rank).
pub struct SkewSummary {
    /// Dispatched requests of the measured windows.
    pub n: u64,
    /// Median.
    pub p50: u64,
    /// p90.
    pub p90: u64,
    /// p99.
    pub p99: u64,
    /// p99.9.
    pub p99_9: u64,
    /// Largest.
    pub max: u64,
}

/// Requested against achieved rate and inter-arrival, per schedule phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseRate {
    /// The phase's name.
    pub phase: String,
    /// Its length.
    pub duration_s: f64,
    /// The rate the schedule asked for.
    pub requested_rps: f64,
    /// Requests scheduled in it.
    pub scheduled: u64,
    /// Of which dispatched.
    pub dispatched: u64,
    /// Dispatched per second.
    pub achieved_rps: f64,
    /// Target mean inter-arrival (1 / rate), and the schedule's and the dispatches' mean and
    /// coefficient of variation (Poisson: CV 1; deterministic: 0).
    pub target_mean_gap_ms: f64,
    /// The target law's coefficient of variation (Poisson 1, deterministic 0).
    pub target_cv: f64,
    /// Mean gap between scheduled sends.
    pub scheduled_mean_gap_ms: Option<f64>,
    /// Coefficient of variation of those gaps.
    pub scheduled_cv: Option<f64>,
    /// Mean gap between actual sends.
    pub dispatched_mean_gap_ms: Option<f64>,
    /// Coefficient of variation of those gaps.
    pub dispatched_cv: Option<f64>,
    /// Kolmogorov-Smirnov distance of the dispatched inter-arrivals from the target law.
    pub dispatched_ks: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
/// The recorder's telemetry over the measured span.
pub struct TelemetrySummary {
    /// Telemetry intervals read.
    pub samples: u64,
    /// The highest host CPU over any pinned window, %.
    pub host_cpu_max_5s_percent: Option<f64>,
    /// When the journal holds the recorders' `cgroup-cpu` seconds with a quota: the highest
    /// share of the quota over any 5 s window, % (what G2.3 reads under v0.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_cpu_max_5s_percent: Option<f64>,
    /// When it holds `cgroup-cpu` seconds at all: time throttled over the measured span, ms,
    /// and the enforcement periods in which the cgroup was throttled, summed over recorders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_throttled: Option<(f64, u64)>,
    /// The recorder's own CPU, % of one core, over the span.
    pub recorder_cpu_percent_of_one_core: Option<f64>,
    /// The highest per-second stall p99, us.
    pub stall_p99_max_us: Option<f64>,
    /// The largest stall, us.
    pub stall_max_us: Option<f64>,
    /// The largest value of the telemetry's `writer_queue_max` field (v0.1 and v0.2 print it as
    /// the queue's largest depth; recorders before the fix wrote the queue's capacity there).
    pub writer_queue_max: u64,
    /// v0.3: the writer queue's largest observed depth, in records (the interval peaks where the
    /// recorder wrote them, else the depths sampled at each interval's end), and how it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer_queue_observed: Option<(u64, String)>,
    /// Times the writer queue was full.
    pub writer_queue_full_events: u64,
    /// Requests the recorder gave up dispatching.
    pub undispatched_total: u64,
}

/// One window's token figures (completed requests only, from each response's usage: the final
/// chunk of a stream, or a non-streamed body).
#[derive(Clone, Debug, Serialize)]
pub struct TokenReport {
    /// Completed requests scheduled in the window.
    pub completed: u64,
    /// Of them, those whose response carried usage (prompt and completion tokens).
    pub with_usage: u64,
    /// Prompt tokens over the requests with usage.
    pub prompt_tokens: u64,
    /// Completion (output) tokens over the requests with usage.
    pub completion_tokens: u64,
    /// Completion tokens of the requests with usage over the window's duration (intended time).
    pub output_tokens_per_s: Option<f64>,
    /// Each request's completion tokens over its end-to-end latency (from t_i), tokens/s, by
    /// nearest rank: p10 (the slow end), p50, p90.
    pub per_request_tokens_per_s: Vec<(String, f64)>,
    /// Time per output token, (e2e - TTFT) / (completion tokens - 1), of the requests with usage
    /// and at least two tokens.
    pub tpot: Distribution,
    /// Inter-token latency per token: each inter-chunk gap divided by its request's tokens per
    /// content event (completion tokens / content events); the inter-chunk gaps themselves where
    /// every chunk carries one token. Filled from the journal's gaps. v0.1-v0.4 only: A4 never
    /// divides a read's gap among its tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl_per_token: Option<Distribution>,
    /// Requests whose chunks carried more than one token on average.
    pub multi_token_chunks: u64,
    /// The reading in words: where usage was missing, what the figures cover.
    pub text: String,
}
