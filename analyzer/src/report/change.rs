//! A testbed change in report.md (SPEC §10 "Reading a testbed change", A4): its steps as
//! states, the spans between them, what the requests met and what the replicas' gauges said.

use std::fmt::Write as _;

use crate::model::{ChangeReport, FirstServed, GaugeAround, RequestGroup};

/// The section, after the windows' tables; nothing for a run without a change (and under
/// v0.1-v0.4).
pub(super) fn section(md: &mut String, change: Option<&ChangeReport>) {
    let Some(c) = change else {
        return;
    };
    let _ = writeln!(
        md,
        "\n## Testbed change (§10): {} {}\n\nEach step at the instant the testbed's controller saw it (`timeline` events); the requests' fates from their records.\n\n| s from the epoch | step | of | replica | as journaled |\n|---|---|---|---|---|",
        c.change, c.ended
    );
    for s in &c.steps {
        let _ = writeln!(
            md,
            "| {:.3} | {} | {} | {} | {} |",
            s.at_s,
            s.step,
            s.number.as_deref().unwrap_or(""),
            s.replica.as_deref().unwrap_or(""),
            s.detail.replace('|', "\\|")
        );
    }
    if !c.spans.is_empty() {
        let _ = writeln!(md, "\n| span | from (s) | s |\n|---|---|---|");
        for s in &c.spans {
            let _ = writeln!(md, "| {} | {:.3} | {:.3} |", s.span, s.from_s, s.seconds);
        }
    }
    requests(md, &c.requests);
    for f in c.firsts.iter().chain(&c.last_failed) {
        picked(md, f);
    }
    gauges(md, &c.gauges);
}

/// The request groups, each by class.
fn requests(md: &mut String, groups: &[RequestGroup]) {
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n| requests | n | by class | the last ended after the boundary |\n|---|---|---|---|"
    );
    for g in groups {
        let classes = g
            .classes
            .iter()
            .map(|k| format!("{} {}", k.class, k.n))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            g.group,
            g.n,
            if classes.is_empty() { "none" } else { &classes },
            g.last_end_after_s
                .map_or(String::new(), |s| format!("{:.1} ms", s * 1e3))
        );
    }
}

/// One picked request: when it was sent and how long after each boundary.
fn picked(md: &mut String, f: &FirstServed) {
    let _ = match f.sent_s {
        None => writeln!(md, "\n- {}: none", f.what),
        Some(at) => writeln!(
            md,
            "\n- {}: sent at {at:.3} s, {}",
            f.what,
            f.after
                .iter()
                .map(|a| format!("{:.3} s after {}", a.seconds, a.boundary))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
}

/// The replicas' gauges around the change.
fn gauges(md: &mut String, gauges: &[GaugeAround]) {
    let Some(first) = gauges.first() else {
        return;
    };
    let _ = writeln!(
        md,
        "\nThe replicas' own gauges around the change (their scrapes, §2):\n\n| replica | gauge | last by {} | first after (s after) | largest after | last |\n|---|---|---|---|---|---|",
        first.boundary
    );
    let number = |v: Option<f64>| v.map_or("unread".into(), |v| format!("{v:.0}"));
    for g in gauges {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            g.source,
            g.gauge,
            number(g.before),
            g.first_after
                .map_or("unread".into(), |(v, s)| format!("{v:.0} ({s:.3})")),
            number(g.largest_after),
            number(g.last)
        );
    }
}
