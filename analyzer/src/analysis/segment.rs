//! Segments on demand (`analyze --by`, issue 19; SPEC §9 "Segments"): each window's requests
//! grouped by the values of the chosen categorical columns, every group analyzed by the same
//! function as a whole window ([`window_report`]), so a segment's completion curve, readings,
//! latencies and tail intervals follow every rule a window's do, its refusals included. The
//! report's per-route segments group their rows with the same [`group`] (`analysis::columns`).

use super::columns::group;
use super::window::window_report;
use crate::estimate::incidence::Method;
use crate::load::Run;
use crate::model::{SegmentColumn, SegmentReport};
use crate::windows::Window;
use percentes_formats::spec::Rules;

/// Most segments one analysis reports, over all windows: a column with more values than this
/// (a connection id, say) is not a segmentation a reader can take in, and is refused.
pub const SEGMENTS_MAX: usize = 512;

/// Segments over the windows past [`SEGMENTS_MAX`]: the report holds none, and says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TooManySegments {
    /// The columns segmented by.
    columns: Vec<&'static str>,
    /// The segments they give.
    segments: usize,
}

impl std::fmt::Display for TooManySegments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "segmenting by {} gives {} segments over the windows, more than the {SEGMENTS_MAX} a report holds: choose fewer or coarser columns",
            self.columns.join(","),
            self.segments
        )
    }
}

/// Every window's segments by `columns`; `Err` when there would be more than
/// [`SEGMENTS_MAX`].
pub(super) fn reports(
    run: &Run,
    cut: &[Window],
    rows_of: &[Vec<usize>],
    columns: &[SegmentColumn],
    method: Method,
    horizon_ns: u64,
    rules: &Rules,
) -> Result<Vec<SegmentReport>, TooManySegments> {
    let mut grouped = Vec::new();
    for (window, rows) in cut.iter().zip(rows_of) {
        for (key, members) in group(run, rows, columns) {
            grouped.push((window, key, members));
        }
    }
    if grouped.len() > SEGMENTS_MAX {
        return Err(TooManySegments {
            columns: columns.iter().map(|c| c.name()).collect(),
            segments: grouped.len(),
        });
    }
    Ok(grouped
        .into_iter()
        .map(|(window, key, members)| {
            // A segment is analyzed as a window of its own (no baseline to compare against: the
            // modal distance is a window's, not a segment's).
            let w = window_report(run, window, &members, &[], method, horizon_ns, rules);
            SegmentReport {
                window: w.window,
                key: columns.iter().map(|c| c.name()).zip(key).collect(),
                scheduled: w.scheduled,
                outcomes: w.outcomes,
                error_rate: w.error_rate,
                censored_rate: w.censored_rate,
                goodput: w.goodput,
                completion: w.completion,
                ttft: w.ttft,
                tpot: w.tokens.tpot,
                e2e: w.e2e,
                ttfat: w.streams.map(|s| s.ttfat),
            }
        })
        .collect())
}
