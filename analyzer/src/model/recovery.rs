//! The recovery report of a fault run (SPEC §5, seeds/004), as `report.json` carries it.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct RecoveryReport {
    pub variant: String,
    /// `recovery`, or `partition heal` under black-hole (bounded below by the partition).
    pub label: String,
    /// Under black-hole: `node-loss-representative`, or why the run is reported as equivalent to
    /// the clean variant (G3, G4).
    pub node_loss_label: Option<String>,
    pub bucket_s: f64,
    pub window_s: f64,
    pub hold_s: f64,
    pub timeout_s: f64,
    pub fire_anchor_s: f64,
    pub pre_fault_baseline: BaselineReport,
    pub to_pre_fault: Ttr,
    pub equilibrium: PlateauReport,
    pub to_equilibrium: Ttr,
    pub caveats: Vec<&'static str>,
    /// When goodput fell below the exit threshold again after the recovery to the pre-fault
    /// baseline (within the recovery timeout): the recovery did not last.
    pub relapse: Option<String>,
    /// Area between the pre-fault baseline and the observed goodput from the anchor to the
    /// recovery (or the timeout), in goodput-seconds.
    pub deficit_goodput_s: Option<f64>,
    pub sweep: Vec<SweepRow>,
    /// Whether every sweep cell orders the two TTRs the same way as the pinned cell (no ordering
    /// claim between baselines otherwise).
    pub sweep_note: String,
    pub components: Vec<Component>,
    pub decomposition: Vec<Boundary>,
    pub timeline: Vec<State>,
    pub durations: Vec<Duration>,
    /// Abort conditions that make the experiment invalid rather than a product failure.
    pub experiment_invalid: Vec<String>,
    /// The goodput series from the run's start, one value per bucket (for plots).
    pub series: Vec<SeriesPoint>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BaselineReport {
    pub goodput: Option<f64>,
    pub from_s: f64,
    pub to_s: f64,
    pub n: u64,
}

/// A time to recovery, or why there is none.
#[derive(Clone, Debug, Serialize)]
pub struct Ttr {
    /// `recovered`, `not recovered within the recovery timeout`, `no baseline`, or `N/A`.
    pub status: String,
    pub ttr_s: Option<f64>,
    /// The instant the entering window ended, in seconds of the run.
    pub at_s: Option<f64>,
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct PlateauReport {
    pub estimable: bool,
    pub from_s: f64,
    pub to_s: f64,
    pub goodput: Option<f64>,
    pub note: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    pub entry_percent: f64,
    pub window_s: f64,
    pub hold_s: f64,
    pub to_pre_fault_s: Option<f64>,
    pub to_equilibrium_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Component {
    pub component: &'static str,
    pub baseline: Option<f64>,
    pub ttr: Ttr,
}

/// A measured boundary of the recovery, or N/A with the reason.
#[derive(Clone, Debug, Serialize)]
pub struct Boundary {
    pub boundary: &'static str,
    pub at_s: Option<f64>,
    pub since_anchor_s: Option<f64>,
    pub evidence: String,
}

/// One state of the failure-injection timeline (seeds/004).
#[derive(Clone, Debug, Serialize)]
pub struct State {
    pub state: &'static str,
    pub from_s: Option<f64>,
    pub evidence: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Duration {
    pub duration: &'static str,
    pub seconds: Option<f64>,
    pub definition: &'static str,
    pub note: String,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct SeriesPoint {
    pub t_s: f64,
    pub goodput: Option<f64>,
    pub scheduled: u64,
}
