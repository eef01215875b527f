//! A4 (v0.5): report.md's goodput table (SPEC §4 "A declared SLO"): each window's goodput under
//! the pinned SLO and, where the configuration declares one, under the user's own, each with
//! its 95 % interval and design effect, and the requests the declared SLO could not judge.

use std::fmt::Write as _;

use crate::model::{ShareInterval, WindowReport};

/// The table, where any window carries the A4 goodput reading (nothing under v0.1-v0.4).
pub(super) fn goodput_table(md: &mut String, windows: &[WindowReport]) {
    if windows.iter().all(|w| w.goodput_interval.is_none()) {
        return;
    }
    let declared = windows.iter().find_map(|w| w.declared_goodput.as_ref());
    let _ = writeln!(
        md,
        "\n## Goodput (§4)\n\nEach share is over every scheduled request of the window, with Wilson's 95 % interval on the count read at its design effect n / n_eff (§7). The pinned SLO: TTFT <= {} ms and e2e <= {} s.{}\n",
        percentes_formats::pins::value::SLO_TTFT_MS,
        percentes_formats::pins::value::SLO_E2E_MS / 1000,
        declared.map_or_else(String::new, |d| format!(
            " Your declared SLO: {} (a request meets it when it completed within every objective of its route; one the journal cannot judge does not).",
            d.slo
        ))
    );
    let mut header = "| window | pinned SLO | 95 % CI | n/n_eff |".to_owned();
    let mut rule = "|---|---|---|---|".to_owned();
    if declared.is_some() {
        header.push_str(" your SLO | 95 % CI | n/n_eff | not judged |");
        rule.push_str("---|---|---|---|");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for w in windows {
        let Some(pinned) = &w.goodput_interval else {
            continue;
        };
        let mut row = format!("| {} | {} |", w.window, share(w.goodput.value));
        row.push_str(&interval(pinned));
        if declared.is_some() {
            match &w.declared_goodput {
                Some(d) => {
                    let _ = write!(
                        row,
                        " {} |{}",
                        share(d.goodput.value),
                        interval(&d.interval)
                    );
                    let unjudged: Vec<String> = d
                        .unjudged
                        .iter()
                        .map(|(m, n)| format!("{n} on {m}"))
                        .collect();
                    let _ = write!(
                        row,
                        " {} |",
                        if unjudged.is_empty() {
                            "none".to_owned()
                        } else {
                            unjudged.join(", ")
                        }
                    );
                }
                None => row.push_str(" n/a | | | |"),
            }
        }
        let _ = writeln!(md, "{row}");
    }
}

fn share(value: Option<f64>) -> String {
    value.map_or_else(
        || "n/a (nothing scheduled)".into(),
        |v| format!("{:.2} %", v * 100.0),
    )
}

/// The interval and design-effect cells, or the refusal.
fn interval(i: &ShareInterval) -> String {
    match (i.interval, i.n_per_effective, &i.refused) {
        (Some((lo, hi)), Some(d), _) => {
            format!(" {:.2}-{:.2} % | {d:.2} |", lo * 100.0, hi * 100.0)
        }
        (_, _, Some(why)) => format!(" none: {why} | |"),
        _ => " none | |".to_owned(),
    }
}
