//! Segments on demand (`analyze --by`, issue 19; SPEC §9 "Segments"): a window's requests cut by
//! one or more categorical columns, each cut with its own outcomes, completion curve and
//! latencies.

use serde::Serialize;

use super::{CurveReport, Distribution, Outcomes, Share};

/// A categorical column a window can be segmented by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SegmentColumn {
    /// The route's label.
    Route,
    /// The replica that served the request (`(unattributed)` when none said).
    Replica,
    /// The release the serving replica ran (`target.replica_releases`, SPEC §10 "Rollouts"):
    /// `(unattributed)` when no replica was named, `(no release)` for a replica the map leaves
    /// out.
    Release,
    /// The response class (`correct-success`, `timeout`, ...; `(no record)`).
    Class,
    /// The outcome (completed, errored, censored, undispatched; `(no record)`).
    Outcome,
    /// The schedule phase the request was intended in.
    Phase,
    /// The HTTP status (`(none)` without a status line).
    Status,
    /// The HTTP version that carried it (`(not recorded)` in an HTTP/1.1-only run).
    Protocol,
    /// The kinds of generated output its response carried, from its stream record (A4):
    /// `answer`, `answer+reasoning`, `tool-call`, ...; `none` without output, and `answer`
    /// for a response whose first content was seen in a journal without stream records.
    Output,
    /// What its prompt could find in a prefix cache, by design (SPEC §1 "Shared prefixes"):
    /// `no shared prefix`, `shared, first use`, `shared, seen before`; `(no pool)` in a run
    /// that declares none.
    Prefix,
}

impl SegmentColumn {
    /// Every column, in the order `--by` help lists them.
    pub const ALL: [SegmentColumn; 10] = [
        SegmentColumn::Route,
        SegmentColumn::Replica,
        SegmentColumn::Release,
        SegmentColumn::Class,
        SegmentColumn::Outcome,
        SegmentColumn::Phase,
        SegmentColumn::Status,
        SegmentColumn::Protocol,
        SegmentColumn::Output,
        SegmentColumn::Prefix,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SegmentColumn::Route => "route",
            SegmentColumn::Replica => "replica",
            SegmentColumn::Release => "release",
            SegmentColumn::Class => "class",
            SegmentColumn::Outcome => "outcome",
            SegmentColumn::Phase => "phase",
            SegmentColumn::Status => "status",
            SegmentColumn::Protocol => "protocol",
            SegmentColumn::Output => "output",
            SegmentColumn::Prefix => "prefix",
        }
    }

    /// `route,replica`: each name once, in the order given; an unknown name is refused with
    /// the ones there are.
    pub fn parse_list(text: &str) -> Result<Vec<SegmentColumn>, ColumnsError> {
        let mut columns = Vec::new();
        for name in text.split(',').map(str::trim) {
            let column = SegmentColumn::ALL
                .into_iter()
                .find(|c| c.name() == name)
                .ok_or_else(|| ColumnsError::Unknown {
                    name: name.to_owned(),
                })?;
            if columns.contains(&column) {
                return Err(ColumnsError::Twice {
                    name: name.to_owned(),
                });
            }
            columns.push(column);
        }
        Ok(columns)
    }
}

/// Why `--by` was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnsError {
    /// No column of this name.
    Unknown {
        /// The name given.
        name: String,
    },
    /// A column named twice.
    Twice {
        /// The name given.
        name: String,
    },
}

impl std::fmt::Display for ColumnsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ColumnsError::Unknown { name } => write!(
                f,
                "no column {name:?} to segment by; the columns are {}",
                SegmentColumn::ALL.map(SegmentColumn::name).join(", ")
            ),
            ColumnsError::Twice { name } => write!(f, "column {name:?} is given twice"),
        }
    }
}

impl std::error::Error for ColumnsError {}

/// The columns `--by` named, as one command-line value (`route,replica`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentColumns(pub Vec<SegmentColumn>);

impl SegmentColumns {
    /// [`SegmentColumn::parse_list`], as clap's value parser.
    pub fn parse(text: &str) -> Result<SegmentColumns, ColumnsError> {
        SegmentColumn::parse_list(text).map(SegmentColumns)
    }
}

/// One segment of one window.
#[derive(Clone, Debug, Serialize)]
pub struct SegmentReport {
    /// The window it is a part of.
    pub window: &'static str,
    /// Its value of each `--by` column, in the order given.
    pub key: Vec<(&'static str, String)>,
    /// Its requests scheduled in the window.
    pub scheduled: u64,
    /// How they ended.
    pub outcomes: Outcomes,
    /// Errored over scheduled.
    pub error_rate: Share,
    /// Censored over scheduled.
    pub censored_rate: Share,
    /// SLO goodput over scheduled (§4).
    pub goodput: Share,
    /// The segment's own completion curve and its readings, with its refusals.
    pub completion: CurveReport,
    /// Time to first token, completed requests only, with its tail intervals or their refusal.
    pub ttft: Distribution,
    /// Time per output token, completed requests with usage only.
    pub tpot: Distribution,
    /// End-to-end latency, completed requests only, with its tail intervals or their refusal.
    pub e2e: Distribution,
    /// A4 (v0.5): time to first answer token, completed requests whose answer came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfat: Option<Distribution>,
}
