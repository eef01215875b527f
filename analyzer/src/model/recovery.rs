//! The recovery report of a fault run (SPEC §5, seeds/004), as `report.json` carries it.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
/// The §5 recovery report of a fault run.
pub struct RecoveryReport {
    /// The fault variant.
    pub variant: String,
    /// `recovery`, or `partition heal` under black-hole (bounded below by the partition).
    pub label: String,
    /// Under black-hole: `node-loss-representative`, or why the run is reported as equivalent to
    /// the clean variant (G3, G4).
    pub node_loss_label: Option<String>,
    /// The goodput bucket, s.
    pub bucket_s: f64,
    /// The detector's sliding window R, s.
    pub window_s: f64,
    /// The detector's hold H, s.
    pub hold_s: f64,
    /// The recovery timeout, s.
    pub timeout_s: f64,
    /// The fire anchor, s from the epoch.
    pub fire_anchor_s: f64,
    /// The two-replica pre-fault baseline the detector recovers to.
    pub pre_fault_baseline: BaselineReport,
    /// Time to recover to the pre-fault baseline.
    pub to_pre_fault: Ttr,
    /// The degraded plateau (the single-replica equilibrium) and its estimability.
    pub equilibrium: PlateauReport,
    /// Time to the plateau.
    pub to_equilibrium: Ttr,
    /// The caveats that travel with every TTR ([`crate::recovery::CAVEATS`]).
    pub caveats: Vec<&'static str>,
    /// When goodput fell below the exit threshold again after the recovery to the pre-fault
    /// baseline (within the recovery timeout): the recovery did not last.
    pub relapse: Option<String>,
    /// Area between the pre-fault baseline and the observed goodput from the anchor to the
    /// recovery (or the timeout), in goodput-seconds.
    pub deficit_goodput_s: Option<f64>,
    /// The 27-cell sensitivity sweep (entry x R x H, exit fixed).
    pub sweep: Vec<SweepRow>,
    /// Whether every sweep cell orders the two TTRs the same way as the pinned cell (no ordering
    /// claim between baselines otherwise).
    pub sweep_note: String,
    /// Recovery of each component (TTFT-SLO, e2e-SLO, error rate, backlog).
    pub components: Vec<Component>,
    /// The measured boundaries of the recovery, or N/A with the reason.
    pub decomposition: Vec<Boundary>,
    /// The failure-injection timeline (seeds/004).
    pub timeline: Vec<State>,
    /// Detection, degradation and recovery, kept apart.
    pub durations: Vec<Duration>,
    /// Abort conditions that make the experiment invalid rather than a product failure.
    pub experiment_invalid: Vec<String>,
    /// The goodput series from the run's start, one value per bucket (for plots).
    pub series: Vec<SeriesPoint>,
    /// v0.3 (amendment A2): how the detector read this run, what it could not read, and the
    /// fault-fidelity evidence. Absent under v0.1 and v0.2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amended: Option<Amended>,
    /// v0.4 (amendment A3): the survivor over the outage and over the recovery apart, each with
    /// its n. Empty before v0.4.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub survivor: Vec<SurvivorReading>,
    /// The version's rule for which claims the report makes (how report.md words the section);
    /// not written.
    #[serde(skip)]
    pub claims: percentes_formats::spec::Claims,
}

/// The survivor over one span of a fault run (A3): the outage (the fire anchor to the confirmed
/// removal) or the recovery (the removal to the recovery to the pre-fault baseline, or the
/// deadline), over the requests scheduled in it.
#[derive(Clone, Debug, Serialize)]
pub struct SurvivorReading {
    /// `outage` or `recovery`.
    pub span: &'static str,
    /// Its start, s from the epoch.
    pub from_s: f64,
    /// Its end, s from the epoch (none when the removal was not confirmed).
    pub to_s: Option<f64>,
    /// Requests scheduled in it.
    pub scheduled: u64,
    /// Of which completed (the TTFT's n).
    pub completed: u64,
    /// TTFT p50 of its completed requests, ms (the pinned histogram).
    pub ttft_p50_ms: Option<f64>,
    /// A4 (v0.5): how many requests the TTFT rests on where fewer than the completed (those with
    /// a first token). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_n: Option<u64>,
    /// Its goodput (met the SLO / scheduled), refused over fewer than
    /// `statistics.share_min_requests` requests.
    pub goodput: Option<f64>,
    /// What was refused or not read, and why.
    pub note: String,
}

/// What amendment A2 (spec v0.3) adds to a recovery report.
#[derive(Clone, Debug, Serialize)]
pub struct Amended {
    /// The figures are withheld because the run is invalid (§9); the timeline and the evidence
    /// stay as the diagnosis.
    pub withheld: Option<String>,
    /// The confirmed removal of the fault that the pre-fault recovery waits for, s from the epoch.
    pub removal_s: Option<f64>,
    /// What confirmed the removal, or why nothing did.
    pub removal_evidence: String,
    /// The fewest scheduled requests a detector window must hold to count.
    pub window_min_requests: u64,
    /// R-windows after the anchor (that the detector could read): in all, too thin, empty.
    pub windows: [u64; 3],
    /// How R and H were sized in this run (dev widening) and what the dev profile cannot show.
    pub notes: Vec<String>,
    /// Seeds/004's seven fault-fidelity evidence points.
    pub fidelity: Vec<Evidence>,
}

/// One fault-fidelity evidence point (seeds/004).
#[derive(Clone, Debug, Serialize)]
pub struct Evidence {
    /// The evidence point (controller, dependency or resource, ...).
    pub point: &'static str,
    /// The fact the seed requires of it.
    pub required: &'static str,
    /// `evidenced` or `not evidenced`.
    pub status: &'static str,
    /// What the journal shows, or what would evidence it.
    pub evidence: String,
}

#[derive(Clone, Debug, Serialize)]
/// The baseline's goodput and where it was measured.
pub struct BaselineReport {
    /// Its goodput (ratio of sums).
    pub goodput: Option<f64>,
    /// Its start, s from the epoch.
    pub from_s: f64,
    /// Its end, s from the epoch.
    pub to_s: f64,
    /// Requests scheduled in it.
    pub n: u64,
}

/// A time to recovery, or why there is none.
#[derive(Clone, Debug, Serialize)]
pub struct Ttr {
    /// `recovered`, `not recovered within the recovery timeout`, `no baseline`, or `N/A`.
    pub status: String,
    /// The time to recovery, s from the fire anchor.
    pub ttr_s: Option<f64>,
    /// The instant the entering window ended, in seconds of the run.
    pub at_s: Option<f64>,
    /// The reading in words.
    pub text: String,
    /// What qualifies this reading (v0.3: a relapse after it, a detector that fired before the
    /// fault's removal, a TTR equal to R that the data make so).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// v0.4 (A3): a reading at the detector's resolution is a bound, not a duration: recovered
    /// no later than this, s after the fire anchor (`ttr_s` is then absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
/// The degraded plateau (§5).
pub struct PlateauReport {
    /// Whether it spans at least R with goodput above zero.
    pub estimable: bool,
    /// Its start, s from the epoch.
    pub from_s: f64,
    /// Its end, s from the epoch.
    pub to_s: f64,
    /// Its goodput.
    pub goodput: Option<f64>,
    /// Why it is or is not estimable.
    pub note: String,
}

#[derive(Clone, Debug, Serialize)]
/// One cell of the sensitivity sweep.
pub struct SweepRow {
    /// The entry threshold X, % of the baseline's goodput.
    pub entry_percent: f64,
    /// The window R, s.
    pub window_s: f64,
    /// The hold H, s.
    pub hold_s: f64,
    /// TTR to the pre-fault baseline in this cell.
    pub to_pre_fault_s: Option<f64>,
    /// TTR to the plateau in this cell.
    pub to_equilibrium_s: Option<f64>,
    /// v0.4 (A3): this cell's recovery to the pre-fault baseline at its own detector's
    /// resolution: recovered by then, s after the fire anchor, a bound and no TTR.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_fault_bound_s: Option<f64>,
    /// v0.4 (A3): the same of its equilibrium.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub equilibrium_bound_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
/// The recovery of one component.
pub struct Component {
    /// Which component.
    pub component: &'static str,
    /// Its baseline value.
    pub baseline: Option<f64>,
    /// Its time to recovery.
    pub ttr: Ttr,
}

/// A measured boundary of the recovery, or N/A with the reason.
#[derive(Clone, Debug, Serialize)]
pub struct Boundary {
    /// When it was observed, ns from the epoch (for the analysis; the report carries `at_s`).
    #[serde(skip)]
    pub at_ns: Option<u64>,
    /// Which boundary (reschedule, container start, weight load, ...).
    pub boundary: &'static str,
    /// When it was observed, s from the epoch.
    pub at_s: Option<f64>,
    /// When, s after the fire anchor.
    pub since_anchor_s: Option<f64>,
    /// The evidence in the journal, or why there is none.
    pub evidence: String,
    /// A3 (v0.4): observed before a boundary listed before it, so no segment ends or starts at
    /// it (not written; its evidence says so).
    #[serde(skip)]
    pub out_of_order: bool,
}

/// One state of the failure-injection timeline (seeds/004).
#[derive(Clone, Debug, Serialize)]
pub struct State {
    /// The state (`Stabilizing`, `Healthy`, ...).
    pub state: &'static str,
    /// When it was entered, s from the epoch, if it was.
    pub from_s: Option<f64>,
    /// The evidence for the transition.
    pub evidence: String,
}

#[derive(Clone, Debug, Serialize)]
/// One of the three durations seeds/004 keeps apart.
pub struct Duration {
    /// Its name (`detection`, `degradation`, `recovery`).
    pub duration: &'static str,
    /// Its length, when both ends were observed.
    pub seconds: Option<f64>,
    /// From which event to which.
    pub definition: &'static str,
    /// Why it is what it is.
    pub note: String,
}

#[derive(Clone, Copy, Debug, Serialize)]
/// One bucket of the goodput series.
pub struct SeriesPoint {
    /// The bucket's start, s from the epoch.
    pub t_s: f64,
    /// Its goodput.
    pub goodput: Option<f64>,
    /// Requests scheduled in it.
    pub scheduled: u64,
}
