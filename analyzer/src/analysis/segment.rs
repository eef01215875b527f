//! Segments on demand (`analyze --by`, issue 19; SPEC §9 "Segments"): each window's requests
//! grouped by the values of the chosen categorical columns, every group analyzed by the same
//! function as a whole window ([`window_report`]), so a segment's completion curve, readings,
//! latencies and tail intervals follow every rule a window's do, its refusals included. The
//! report's per-route segments group their rows with the same [`group`].

use std::collections::BTreeMap;

use percentes_formats::journal::records::{class_name, Outcome};

use super::window::window_report;
use crate::estimate::incidence::Method;
use crate::estimate::quantile::Printing;
use crate::frame::NONE;
use crate::load::Run;
use crate::model::{SegmentColumn, SegmentReport};
use crate::windows::Window;

/// Most segments one analysis reports, over all windows: a column with more values than this
/// (a connection id, say) is not a segmentation a reader can take in, and is refused.
pub const SEGMENTS_MAX: usize = 512;

/// Row `row`'s value of `column`, as a report prints it.
pub(crate) fn value(run: &Run, column: SegmentColumn, row: usize) -> String {
    let requests = &run.requests;
    let recorded = requests.outcome(row).is_some();
    match column {
        SegmentColumn::Route => run
            .config
            .routes
            .get(requests.route[row] as usize)
            .map_or_else(
                || format!("route-{}", requests.route[row]),
                |r| r.label.clone(),
            ),
        SegmentColumn::Replica => requests
            .replica_name(row)
            .unwrap_or("(unattributed)")
            .to_owned(),
        SegmentColumn::Class if recorded => class_name(requests.class[row])
            .map_or_else(|| format!("class-{}", requests.class[row]), str::to_owned),
        SegmentColumn::Outcome if recorded => requests
            .outcome(row)
            .map(Outcome::name)
            .unwrap_or_default()
            .to_owned(),
        SegmentColumn::Class | SegmentColumn::Outcome => "(no record)".to_owned(),
        SegmentColumn::Phase => run
            .header
            .schedule
            .phases
            .get(requests.phase[row] as usize)
            .map_or_else(
                || format!("phase-{}", requests.phase[row]),
                |p| p.name.clone(),
            ),
        SegmentColumn::Status => match requests.http_status[row] {
            0 => "(none)".to_owned(),
            status => status.to_string(),
        },
        SegmentColumn::Protocol => match requests.protocol[row] {
            1 => "HTTP/1.1".to_owned(),
            2 => "HTTP/2".to_owned(),
            _ if requests.dispatched_ns[row] == NONE => "(not dispatched)".to_owned(),
            _ => "(not recorded)".to_owned(),
        },
    }
}

/// `rows` grouped by their values of `columns`, the groups in the order of their keys.
pub(crate) fn group(
    run: &Run,
    rows: &[usize],
    columns: &[SegmentColumn],
) -> BTreeMap<Vec<String>, Vec<usize>> {
    let mut groups: BTreeMap<Vec<String>, Vec<usize>> = BTreeMap::new();
    for &row in rows {
        let key = columns.iter().map(|&c| value(run, c, row)).collect();
        groups.entry(key).or_default().push(row);
    }
    groups
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
    printing: Printing,
) -> Result<Vec<SegmentReport>, String> {
    let mut grouped = Vec::new();
    for (window, rows) in cut.iter().zip(rows_of) {
        for (key, members) in group(run, rows, columns) {
            grouped.push((window, key, members));
        }
    }
    if grouped.len() > SEGMENTS_MAX {
        return Err(format!(
            "segmenting by {} gives {} segments over the windows, more than the {SEGMENTS_MAX} a report holds: choose fewer or coarser columns",
            columns.iter().map(|c| c.name()).collect::<Vec<_>>().join(","),
            grouped.len()
        ));
    }
    Ok(grouped
        .into_iter()
        .map(|(window, key, members)| {
            // A segment is analyzed as a window of its own (no baseline to compare against: the
            // modal distance is a window's, not a segment's).
            let w = window_report(run, window, &members, &[], method, horizon_ns, printing);
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
            }
        })
        .collect())
}
