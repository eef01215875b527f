//! A request row's value of a categorical column (route, replica, release, class, outcome, phase,
//! status, protocol, output, prefix), as a report prints it, and rows grouped by those values:
//! what `analyze --by`'s segments and the per-route table of each window both group by.

use std::collections::BTreeMap;

use percentes_formats::journal::records::{class_name, Outcome};

use crate::frame::NONE;
use crate::load::Run;
use crate::model::SegmentColumn;

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
        SegmentColumn::Release => match requests.replica_name(row) {
            None => "(unattributed)".to_owned(),
            Some(replica) => run
                .config
                .target
                .replica_releases
                .get(replica)
                .map_or("(no release)", String::as_str)
                .to_owned(),
        },
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
        SegmentColumn::Output => match &requests.streams {
            Some(streams) if streams.kinds[row] != 0 => streams.kinds_label(row),
            _ if requests.first_content_ns[row] != NONE => "answer".to_owned(),
            _ => "none".to_owned(),
        },
        SegmentColumn::Prefix => run
            .prefixes
            .as_ref()
            .map_or("(no pool)", |p| p.expectation[row].name())
            .to_owned(),
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
