//! The first token's path in report.md (SPEC §2 "The first token's path", A4): per window, the
//! client's split of its time to first token and the signatures it shows.

use std::fmt::Write as _;

use crate::model::{Counts, Signature, Spread, WindowReport};
use crate::words::percent_of;

fn spread(s: &Option<Spread>) -> String {
    s.map_or("n/a".into(), |s| {
        format!("{:.3} / {:.3} / {:.3}", s.mean_ms, s.p50_ms, s.p90_ms)
    })
}

fn deltas(c: &Counts) -> String {
    let at = |name: &str| {
        c.percentiles
            .iter()
            .find(|(n, _)| n == name)
            .map_or("n/a".into(), |(_, v)| v.to_string())
    };
    if c.n == 0 {
        return "n/a".into();
    }
    format!(
        "{} / {} / {}",
        at("p50"),
        at("p90"),
        c.max.map_or("n/a".into(), |m| m.to_string())
    )
}

/// The section, after the segments; nothing where no window was decomposed (v0.1-v0.4).
pub(super) fn section(md: &mut String, windows: &[WindowReport]) {
    let paths: Vec<_> = windows
        .iter()
        .filter_map(|w| Some((w.window, w.first_token_path.as_ref()?)))
        .collect();
    if paths.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## The first token's path (§2, A4)\n\nWhere each window's time to first token went, conditional on completion, over its streamed requests: from the intended time to the request written whole, from there to the response head, and from the head to the first generated delta, each mean / p50 / p90 in ms; how often the head came in the same read as the first token; the deltas the first delivery carried (p50 / p90 / max). Server metrics, where scraped, split the client's time at the server's clock (server-side evidence).\n"
    );
    let _ = writeln!(
        md,
        "| window | requests | intended to written | written to head | head to first token | head with first token | first delivery, deltas | signatures |\n|---|---|---|---|---|---|---|---|"
    );
    for (window, p) in &paths {
        let _ = writeln!(
            md,
            "| {window} | {} | {} | {} | {} | {} | {} | {} |",
            p.n,
            spread(&p.to_written),
            spread(&p.to_head),
            spread(&p.head_to_first),
            if p.n == 0 {
                "n/a".into()
            } else {
                format!(
                    "{} ({})",
                    p.head_with_first,
                    percent_of(p.head_with_first, p.n)
                )
            },
            deltas(&p.first_delivery),
            if p.signatures.is_empty() {
                "none".into()
            } else {
                p.signatures
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    let shown: Vec<(&str, &Signature)> = paths
        .iter()
        .flat_map(|(window, p)| p.signatures.iter().map(move |s| (*window, s)))
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(md);
    }
    for line in grouped(&shown) {
        let _ = writeln!(md, "- {line}");
    }
}

/// Each signature once, with the windows that show it and the words of one of them (the
/// baseline's where it shows it, else the first's): every window's own figures are in the
/// table and in report.json.
pub(super) fn grouped(shown: &[(&str, &Signature)]) -> Vec<String> {
    let mut names: Vec<&str> = Vec::new();
    for (_, s) in shown {
        if !names.contains(&s.name) {
            names.push(s.name);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let of: Vec<&(&str, &Signature)> =
                shown.iter().filter(|(_, s)| s.name == name).collect();
            let windows: Vec<&str> = of.iter().map(|(w, _)| *w).collect();
            let (window, said) = of.iter().find(|(w, _)| *w == "baseline").unwrap_or(&of[0]);
            format!(
                "{name} ({}): in {window}, {}.",
                windows.join(", "),
                said.text
            )
        })
        .collect()
}
