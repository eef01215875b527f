//! The recovery section of report.md (SPEC §5, §9): the two baselines, A2's reading of the
//! detector, A3's survivor spans, the components, the sweep, the decomposition, the timeline and
//! the fault-fidelity evidence.

use std::fmt::Write as _;

use percentes_formats::spec::Claims;

use crate::model::RecoveryReport;

pub(super) fn recovery_section(md: &mut String, r: &RecoveryReport) {
    let f = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.3}"));
    let _ = writeln!(md, "\n## Recovery (§5): {}\n", r.variant);
    let _ = writeln!(md, "Label: {}.", r.label);
    if let Some(label) = &r.node_loss_label {
        let _ = writeln!(md, "Node-loss label: {label}.");
    }
    let _ = writeln!(
        md,
        "\nSLO-goodput in {:.3} s buckets by intended time; detector R {:.3} s, H {:.3} s, entry 90 %, exit 85 %; fire anchor {:.3} s; recovery timeout {:.3} s.\n",
        r.bucket_s, r.window_s, r.hold_s, r.fire_anchor_s, r.timeout_s
    );
    let _ = writeln!(
        md,
        "| baseline | window | goodput | time to recovery |\n|---|---|---|---|"
    );
    let b = &r.pre_fault_baseline;
    // A3: a degradation's baselines are not the §1 experiment's two-replica and single-replica
    // ones, and are not called so.
    let degradation = r.claims == Claims::Supported && r.variant == "degradation";
    let (pre_label, plateau_label) = if degradation {
        ("pre-fault", "degraded plateau")
    } else {
        (
            "two-replica pre-fault",
            "single-replica equilibrium (plateau)",
        )
    };
    let _ = writeln!(
        md,
        "| {pre_label} | {:.3}-{:.3} s (n {}) | {} | {} |",
        b.from_s,
        b.to_s,
        b.n,
        f(b.goodput),
        r.to_pre_fault.text
    );
    let e = &r.equilibrium;
    // A3 withholds the plateau's bounds with its reading (they are set by the detection), and
    // calls an empty one empty.
    let bounds = match r.claims {
        Claims::Supported if e.note.starts_with("withheld") => String::new(),
        Claims::Supported if e.from_s == e.to_s => format!("empty at {:.3} s, ", e.from_s),
        _ => format!("{:.3}-{:.3} s, ", e.from_s, e.to_s),
    };
    let _ = writeln!(
        md,
        "| {plateau_label} | {bounds}{} | {} | {} |",
        e.note,
        f(e.goodput),
        r.to_equilibrium.text
    );
    let _ = writeln!(md);
    if let Some(a) = &r.amended {
        amended_lines(md, r, a);
    }
    survivor_table(md, &r.survivor);
    if let Some(relapse) = &r.relapse {
        let _ = writeln!(md, "- **Relapse:** {relapse}.");
    }
    for caveat in &r.caveats {
        let _ = writeln!(md, "- Caveat: {caveat}.");
    }
    let _ = writeln!(
        md,
        "- Integrated goodput deficit (anchor to recovery or timeout): {} goodput-seconds.",
        f(r.deficit_goodput_s)
    );
    let _ = writeln!(md, "\n| component | baseline | recovery |\n|---|---|---|");
    for c in &r.components {
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            c.component,
            f(c.baseline),
            c.ttr.text
        );
    }
    let _ = writeln!(
        md,
        "\nSensitivity (exit fixed at 85 %): {}.\n",
        r.sweep_note
    );
    let _ = writeln!(md, "| entry % | R (s) | H (s) | to pre-fault (s) | to equilibrium (s) |\n|---|---|---|---|---|");
    // A3: a cell at its detector's resolution shows its bound as such, not as "n/a".
    let cell = |value: Option<f64>, bound: Option<f64>| match bound {
        Some(b) => format!("by {b:.3} (bound)"),
        None => f(value),
    };
    for row in &r.sweep {
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.3} | {} | {} |",
            row.entry_percent,
            row.window_s,
            row.hold_s,
            cell(row.to_pre_fault_s, row.pre_fault_bound_s),
            cell(row.to_equilibrium_s, row.equilibrium_bound_s)
        );
    }
    let _ = writeln!(md, "\n### Decomposition (measured boundaries only)\n");
    let _ = writeln!(
        md,
        "| boundary | at (s) | since anchor (s) | evidence |\n|---|---|---|---|"
    );
    for d in &r.decomposition {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            d.boundary,
            f(d.at_s),
            f(d.since_anchor_s),
            d.evidence
        );
    }
    let _ = writeln!(md, "\n### Failure-injection timeline\n");
    let _ = writeln!(md, "| state | from (s) | evidence |\n|---|---|---|");
    for s in &r.timeline {
        let _ = writeln!(md, "| {} | {} | {} |", s.state, f(s.from_s), s.evidence);
    }
    let _ = writeln!(md);
    for d in &r.durations {
        let _ = writeln!(
            md,
            "- {}: {} ({}){}",
            d.duration,
            d.seconds.map_or("N/A".to_owned(), |v| format!("{v:.3} s")),
            d.definition,
            if d.note.is_empty() {
                String::new()
            } else {
                format!("; {}", d.note)
            }
        );
    }
    if let Some(a) = &r.amended {
        let _ = writeln!(md, "\n### Fault-fidelity evidence (seeds/004)\n");
        let _ = writeln!(
            md,
            "| evidence point | required fact | status | what the journal shows |\n|---|---|---|---|"
        );
        for e in &a.fidelity {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                e.point, e.required, e.status, e.evidence
            );
        }
    }
    if r.experiment_invalid.is_empty() {
        let _ = writeln!(
            md,
            "\nNo abort condition fired: a failure here is the product's, not the experiment's."
        );
    } else {
        let _ = writeln!(
            md,
            "\n**The experiment is invalid (not a product failure):** {}.",
            r.experiment_invalid.join("; ")
        );
    }
}

/// A3 (v0.4): the survivor over the outage and the recovery apart, each with its n.
fn survivor_table(md: &mut String, spans: &[crate::model::SurvivorReading]) {
    if spans.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\nThe service over the outage (the fire anchor to the confirmed removal) and over the recovery (the removal to the recovery to the pre-fault baseline, or the deadline), by intended time (A3):\n"
    );
    let _ = writeln!(
        md,
        "| span | from-to (s) | scheduled | completed | TTFT p50 (completed) | goodput | refused or not read |\n|---|---|---|---|---|---|---|"
    );
    for s in spans {
        let _ = writeln!(
            md,
            "| {} | {:.3}-{} | {} | {} | {} | {} | {} |",
            s.span,
            s.from_s,
            s.to_s.map_or("unknown".to_owned(), |t| format!("{t:.3}")),
            s.scheduled,
            s.completed,
            s.ttft_p50_ms.map_or("none".to_owned(), |v| format!(
                "{v:.1} ms (n {})",
                s.ttft_n.unwrap_or(s.completed)
            )),
            s.goodput.map_or("refused".to_owned(), |g| format!(
                "{:.1} % of {}",
                g * 100.0,
                s.scheduled
            )),
            s.note
        );
    }
    let _ = writeln!(md);
}

/// The lines amendment A2 (v0.3) adds under the baselines table.
fn amended_lines(md: &mut String, r: &RecoveryReport, a: &crate::model::Amended) {
    if let Some(withheld) = &a.withheld {
        let _ = writeln!(md, "**Withheld:** {withheld}.\n");
    }
    let _ = writeln!(
        md,
        "- Rules (A2, §5): a detector window counts only with at least {} scheduled requests, and a hold only when counting windows read every bucket of it; the pre-fault baseline is looked for from the confirmed removal on; the equilibrium is entered within 10 % of the plateau on either side and held within 15 %; the plateau ends at the confirmed removal or where the recovering window starts, whichever is first.",
        a.window_min_requests
    );
    let _ = writeln!(
        md,
        "- Removal: {}.",
        a.removal_s.map_or_else(
            || a.removal_evidence.clone(),
            |at| format!("{at:.3} s, {}", a.removal_evidence)
        )
    );
    for note in &a.notes {
        let _ = writeln!(md, "- Note: {note}.");
    }
    for (what, ttr) in [
        ("to the pre-fault baseline", &r.to_pre_fault),
        ("to the equilibrium", &r.to_equilibrium),
    ] {
        for flag in &ttr.flags {
            let _ = writeln!(md, "- **Flag ({what}):** {flag}.");
        }
    }
}
