//! The pre-committed headline (SPEC appendix): one sentence whose slots are filled from measured
//! summaries only, and say `[not measured]` otherwise. A pure function over the run-level
//! summaries, called by `analyze` for one run and by `campaign` over the five runs of each
//! variant.

use crate::estimate::runs;
use crate::model::{Group, RecoveryReport, Report, Summary};
use crate::summaries::{self, RunRef};

/// The headline of one run alone (a report's own line).
pub fn of_run(report: &Report) -> String {
    let run = [RunRef {
        name: "this run",
        report,
        accelerator: &[],
    }];
    sentence(
        &summaries::groups(&run),
        &summaries::clean_delete_recoveries(&run),
    )
}

const EMPTY: &str = "[not measured]";

/// The pre-committed headline (SPEC appendix), each slot from a measurement or left empty.
pub fn sentence(groups: &[Group], clean_delete: &[&RecoveryReport]) -> String {
    let median = |variant: &str, scalar: &str| -> Option<Summary> {
        groups
            .iter()
            .find(|g| g.variant == variant)
            .and_then(|g| g.scalars.iter().find(|s| s.name == scalar))
            .and_then(|s| s.summary.clone())
    };
    let pct = |s: Option<Summary>| s.map_or(EMPTY.to_owned(), |s| format!("{:.1} %", s.median));
    let ms = |s: Option<Summary>| s.map_or(EMPTY.to_owned(), |s| format!("{:.0} ms", s.median));
    let share =
        |s: Option<Summary>| s.map_or(EMPTY.to_owned(), |s| format!("{:.1} %", s.median * 100.0));
    let tte = median("clean-delete", "TTR to the single-replica equilibrium");
    let ttr = median("clean-delete", "TTR to the two-replica pre-fault baseline");
    let (segments, dominant) = segments(clean_delete);
    format!(
        "Under clean delete, {} of the requests in flight on the lost replica failed; under black-hole, {} failed and {} timed out. \
         The survivor's time to first token (conditional on completion) went from {} to {}, and {} of scheduled requests completed within one second. \
         The survivor settled into its single-replica equilibrium after {} (range {} over {} runs); the two-replica baseline returned after {}, of which {} were measured, {} the largest.",
        pct(median("clean-delete", "in flight on the victim at fire: failed")),
        pct(median("black-hole", "in flight on the victim at fire: failed")),
        pct(median("black-hole", "in flight on the victim at fire: timed out")),
        ms(median("clean-delete", "baseline TTFT p50 (conditional on completion)")),
        ms(median("clean-delete", "fault TTFT p50 (conditional on completion)")),
        share(median("clean-delete", "fault window: completion incidence within 1 s")),
        tte.as_ref().map_or(EMPTY.to_owned(), |s| format!("{:.1} s", s.median)),
        tte.as_ref().map_or(EMPTY.to_owned(), |s| format!("{:.1}-{:.1} s", s.min, s.max)),
        tte.as_ref().map_or(EMPTY.to_owned(), |s| s.n.to_string()),
        ttr.as_ref().map_or(EMPTY.to_owned(), |s| format!(
            "{:.1} s{}",
            s.median,
            relapses(clean_delete)
        )),
        segments,
        dominant,
    )
}

/// Under v0.3 (A2), how many of the runs relapsed after the recovery the TTR reads, said beside
/// it (empty when none did, and always under v0.1 and v0.2).
fn relapses(reports: &[&RecoveryReport]) -> String {
    let relapsed = reports
        .iter()
        .filter(|r| {
            r.amended.is_some()
                && r.to_pre_fault
                    .flags
                    .iter()
                    .any(|f| f.starts_with("relapsed"))
        })
        .count();
    if relapsed == 0 {
        String::new()
    } else {
        format!(
            " (then relapsed in {relapsed} of {} runs: goodput fell below the exit threshold again)",
            reports.len()
        )
    }
}

/// Whether a boundary `at` seconds after the anchor may be named as a measured segment of the
/// TTR it qualifies: always under v0.1 and v0.2; under v0.3 (A2) only at or before that TTR.
fn within_ttr(report: &RecoveryReport, at: f64) -> bool {
    report.amended.is_none() || report.to_pre_fault.ttr_s.is_some_and(|ttr| at <= ttr)
}

/// The measured decomposition segments of the clean-delete runs: which boundaries every run
/// measured, and the segment (anchor to the first, then between consecutive ones) with the
/// largest median length.
fn segments(reports: &[&RecoveryReport]) -> (String, String) {
    let Some(first) = reports.first() else {
        return (EMPTY.into(), EMPTY.into());
    };
    let measured: Vec<&str> = first
        .decomposition
        .iter()
        .map(|b| b.boundary)
        .filter(|name| {
            reports.iter().all(|r| {
                r.decomposition.iter().any(|b| {
                    b.boundary == *name && b.since_anchor_s.is_some_and(|at| within_ttr(r, at))
                })
            })
        })
        .collect();
    if measured.is_empty() {
        return (EMPTY.into(), EMPTY.into());
    }
    let mut best: Option<(String, f64)> = None;
    let mut previous = "the fire";
    for name in &measured {
        let lengths: Vec<f64> = reports
            .iter()
            .filter_map(|r| {
                let at = |n: &str| {
                    r.decomposition
                        .iter()
                        .find(|b| b.boundary == n)
                        .and_then(|b| b.since_anchor_s)
                };
                let end = at(name)?;
                let start = if previous == "the fire" {
                    Some(0.0)
                } else {
                    at(previous)
                };
                start.map(|s| end - s)
            })
            .collect();
        if let Some(s) = runs::summarize(&lengths) {
            if best.as_ref().is_none_or(|(_, b)| s.median > *b) {
                best = Some((
                    format!("{previous} to {name} ({:.1} s)", s.median),
                    s.median,
                ));
            }
        }
        previous = name;
    }
    (
        measured.join(", "),
        best.map_or(EMPTY.into(), |(text, _)| text),
    )
}
