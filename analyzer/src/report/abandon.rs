//! A4 (v0.5): report.md's abandonment table (SPEC §1 "Abandonment"): per window, the requests
//! the schedule marked for abandonment, those the client closed at their instant and those that
//! ended first.

use std::fmt::Write as _;

use crate::model::WindowReport;

/// The table, where the schedule declares an abandonment (nothing otherwise, or under
/// v0.1-v0.4).
pub(super) fn abandon_table(md: &mut String, windows: &[WindowReport]) {
    let rows: Vec<_> = windows
        .iter()
        .filter_map(|w| Some((w, w.abandonment.as_ref()?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Abandonment (§1)\n\nThe schedule marks requests for the client to close at an instant drawn in advance (a user closing the tab): one that had not ended by then is `abandoned`, its own outcome, not an error of the target and not among the censored. The completion curve censors it at that instant (a planned censoring, independent of the target); goodput counts it as not meeting the SLO (it did not complete). A slower target leaves more marked requests unfinished at their instant.\n\n| window | marked | abandoned | ended first |\n|---|---|---|---|"
    );
    for (w, a) in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            w.window, a.marked, a.abandoned, a.ended_first
        );
    }
}
