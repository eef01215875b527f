//! A4 (v0.5): a testbed change read from the journal's timeline (SPEC §10 "Reading a testbed
//! change"): its steps as states, the spans between them, and what the requests met.

use serde::Serialize;

/// A rollout, rollback, scale-out or proxy failover, as the run's journal holds it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangeReport {
    /// `rollout`, `rollback`, `scale-out` or `proxy failover`.
    pub change: &'static str,
    /// How it ended: `complete`, `failed: <the journal's words>`, or `unfinished: no end
    /// journaled` (the run ended first).
    pub ended: String,
    /// Each step, in journal order: the change's states.
    pub steps: Vec<ChangeState>,
    /// The spans between steps: the change's decomposition.
    pub spans: Vec<ChangeSpan>,
    /// Groups of requests and what each met.
    pub requests: Vec<RequestGroup>,
    /// The first request served after a boundary, and how long after it.
    pub firsts: Vec<FirstServed>,
    /// A scale-out's last request sent after the decision that did not complete: where the
    /// failures end (absent for other changes and where every one completed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failed: Option<FirstServed>,
    /// What the replicas' own gauges said around the change (a scale-out's lone replica's
    /// waiting queue, a failover's running requests), where they were scraped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gauges: Vec<GaugeAround>,
    /// The reading in one line, for the summary.
    pub text: String,
}

/// One step of the change: a state from the instant the controller saw it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangeState {
    /// Seconds from the run's epoch.
    pub at_s: f64,
    /// The step (`process started`, `in service`, `proxy killed`, ...).
    pub step: &'static str,
    /// A rollout's step, `1 of 2`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<String>,
    /// The replica it happened to, where the step names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The journal's words.
    pub detail: String,
}

/// The time between two steps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangeSpan {
    /// What it is, in words (`decision to in service`).
    pub span: String,
    /// Seconds from the run's epoch at its start.
    pub from_s: f64,
    /// Its length, s.
    pub seconds: f64,
}

/// Requests picked by what they were doing at a boundary, and how they ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestGroup {
    /// Which requests, in words.
    pub group: String,
    /// How many.
    pub n: u64,
    /// How they ended, by class, largest first (`correct-success` for those completed).
    pub classes: Vec<ClassCount>,
    /// The last one's end after the boundary that picks them, s; absent for none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_end_after_s: Option<f64>,
}

/// A class and how many ended in it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassCount {
    /// The class's name (SPEC §3).
    pub class: String,
    /// How many.
    pub n: u64,
}

/// A request picked by a rule (the first completed after a boundary, the last that did not
/// complete): when it was sent, and how long after each boundary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FirstServed {
    /// Which request, in words (`first served after the kill`).
    pub what: String,
    /// When it was sent, s from the epoch; absent when none was.
    pub sent_s: Option<f64>,
    /// How long after each boundary it names.
    pub after: Vec<After>,
}

/// A time after a named boundary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct After {
    /// The boundary (`the kill`).
    pub boundary: String,
    /// Seconds after it.
    pub seconds: f64,
}

/// One replica's gauge around a boundary of the change, from its scrapes (SPEC §2 "Server-side
/// evidence").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GaugeAround {
    /// The replica (scrape source).
    pub source: String,
    /// Which gauge: `requests waiting` or `requests running`.
    pub gauge: &'static str,
    /// The boundary (`the decision`, `the kill`).
    pub boundary: String,
    /// Its last reading at or before the boundary.
    pub before: Option<f64>,
    /// Its first reading after the boundary, and how long after it, s.
    pub first_after: Option<(f64, f64)>,
    /// Its largest reading after the boundary.
    pub largest_after: Option<f64>,
    /// Its last reading in the run.
    pub last: Option<f64>,
}
