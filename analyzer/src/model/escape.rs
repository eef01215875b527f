//! What the report keeps of an escaped experiment, and the cleanup verdict (seeds/004).

use serde::Serialize;

/// What an escaped experiment's report keeps.
#[derive(Clone, Debug, Serialize)]
pub struct EscapeReport {
    /// The trigger (`protected-budget`, `undeclared-replica`, `cleanup-failed`).
    pub trigger: String,
    /// When it fired, s from the epoch.
    pub at_s: f64,
    /// The seeds/004 retention list, item by item, each filled from the journal or marked
    /// `not recorded`.
    pub retain: Vec<Retained>,
}

#[derive(Clone, Debug, Serialize)]
/// One item of the retention list.
pub struct Retained {
    /// What seeds/004 asks to keep.
    pub item: &'static str,
    /// Its value from the journal, or `not recorded`.
    pub value: String,
}

/// The cleanup verdict of a fault run.
#[derive(Clone, Debug, Serialize)]
pub struct CleanupReport {
    /// `confirmed`, `expired` (the armed expiry, unconfirmed by the recorder), `failed`,
    /// `not recorded`, or `not applicable` (a deletion is not undone).
    pub removal: &'static str,
    /// When the removal was recorded, s from the epoch.
    pub removal_at_s: Option<f64>,
    /// Every removal attempt in the journal, with its time.
    pub attempts: Vec<String>,
    /// `ok` probes of the target after the removal (after the fire for a deletion).
    pub healthy_observations: u64,
    /// Whether the removal and a second healthy observation were both recorded.
    pub confirmed: bool,
    /// The verdict in words.
    pub verdict: String,
}
