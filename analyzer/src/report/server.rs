//! The server-side evidence in report.md (SPEC §2): the sources' scrapes, the receive-path check
//! and the server's gauges per window, the counts reconciled; and, inside the recovery section,
//! what the survivor's own metrics say of the outage and the recovery.

use std::fmt::Write as _;

use crate::model::{GaugeSummary, ServerComparison, ServerEvidence, ServerWindow, WindowReport};

fn gauge(g: &Option<GaugeSummary>, unit: &str) -> String {
    g.map_or("n/a".into(), |g| {
        format!("{:.2}{unit} (max {:.2}{unit})", g.mean, g.max)
    })
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn count(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.0}"))
}

fn means(c: &Option<ServerComparison>) -> String {
    let Some(c) = c else {
        return "n/a".into();
    };
    let ms = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.3}"));
    format!(
        "{} / {} ms (n {} / {}); {}",
        ms(c.server_mean_ms),
        ms(c.client_mean_ms),
        c.server_n,
        c.client_n,
        c.verdict
    )
}

/// Each source's scrapes, and the first failure of each that had one.
fn sources_table(md: &mut String, s: &ServerEvidence) {
    let _ = writeln!(
        md,
        "| source | answered | failed | series | roles | first answer | restarted at |\n|---|---|---|---|---|---|---|"
    );
    for src in &s.sources {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            src.source,
            src.answered,
            src.failed,
            src.series,
            if src.roles.is_empty() {
                "none recognised".into()
            } else {
                src.roles.join(", ")
            },
            src.first_answer_s
                .map_or("never".into(), |t| format!("{t:.3} s")),
            if src.restarts_s.is_empty() {
                "-".into()
            } else {
                src.restarts_s
                    .iter()
                    .map(|t| format!("{t:.3} s"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    for src in s.sources.iter().filter(|s| s.failed > 0) {
        if let Some(first) = &src.first_failure {
            let _ = writeln!(md, "\n{}'s first failed scrape: {first}.", src.source);
        }
    }
}

/// The section after the recovery section.
pub(super) fn section(md: &mut String, s: &ServerEvidence) {
    let _ = writeln!(md, "\n## Server-side evidence (§2, not a gate)\n");
    let _ = writeln!(
        md,
        "The target's own metrics, scraped every {:.0} ms into the journal. Per window, the server's increases run from the scrape at or before the window's start to the last at or before its end, and the client's requests are taken over that same span. Server means are exact (sum over count); server quantiles are known to their histogram bucket.\n",
        s.period_ms
    );
    sources_table(md, s);
    let _ = writeln!(md, "\nCounts over the scraped span:\n");
    for r in &s.reconciliation {
        let _ = writeln!(md, "- {}.", r.text);
    }
    if s.reconciliation.is_empty() {
        let _ = writeln!(md, "- no source answered twice: nothing to reconcile.");
    }
    let _ = writeln!(md, "- {}.", capitalised(&s.preflight));
    if let Some(why) = &s.windows_withheld {
        let _ = writeln!(md, "\nPer window: {why}.");
        return;
    }
    let _ = writeln!(
        md,
        "\n| window | source | span | first token, server / client mean | end-to-end, server / client mean | queue | running | KV cache | preemptions | finished, server / client |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for w in &s.windows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} |",
            w.window,
            w.source,
            w.span_s
                .map_or("no two scrapes".into(), |(a, b)| format!("{a:.3}-{b:.3} s")),
            means(&w.first_token),
            means(&w.end_to_end),
            gauge(&w.queue, ""),
            gauge(&w.running, ""),
            gauge(&w.kv_cache_percent, " %"),
            count(w.preemptions),
            count(w.server_finished),
            w.client_finished
        );
    }
    prefix_lines(md, s);
    let _ = writeln!(md, "\nReceive-path check, first token (§2):\n");
    for w in s.windows.iter().filter(|w| w.first_token.is_some()) {
        if let Some(c) = &w.first_token {
            let _ = writeln!(md, "- {} / {}: {}.", w.window, w.source, c.text);
        }
    }
    path_lines(md, s);
}

/// A4: the prefix cache per window, where the server counts its lookups (issue 55 item 2).
fn prefix_lines(md: &mut String, s: &ServerEvidence) {
    let cached: Vec<_> = s
        .windows
        .iter()
        .filter_map(|w| Some((w, w.prefix_cache.as_ref()?)))
        .collect();
    if !cached.is_empty() {
        let _ = writeln!(
            md,
            "\nPrefix cache, from the server's own counters (prompt tokens it looked up, and those it held):\n"
        );
        for (w, p) in cached {
            let share = p
                .hit_percent
                .map_or("no lookup".to_owned(), |h| format!("{h:.2} % hit"));
            let designed = match (&p.designed, p.verdict) {
                (Some(d), verdict) => format!(
                    "; the workload designed {}{} over the same {} requests ({} of {} prompt tokens the server reported){}",
                    d.designed_percent
                        .map_or("no figure (no usage)".to_owned(), |x| format!("{x:.2} %")),
                    d.block_tokens
                        .map_or(String::new(), |b| format!(" in whole {b}-token blocks")),
                    d.requests,
                    d.designed_tokens,
                    d.prompt_tokens,
                    verdict.map_or(String::new(), |v| format!(": {}", v.words()))
                ),
                (None, _) => String::new(),
            };
            let _ = writeln!(
                md,
                "- {} / {}: {:.0} of {:.0} tokens, {share}{designed}.",
                w.window, w.source, p.hit_tokens, p.queried_tokens
            );
        }
    }
}

/// A4: each window's designed prefix reuse, where the workload declares shared prefixes (SPEC
/// §1 "Shared prefixes"), whether or not the server's counters were read.
pub(super) fn designed_lines(md: &mut String, windows: &[WindowReport]) {
    let designed: Vec<_> = windows
        .iter()
        .filter_map(|w| Some((w.window, w.prefix_reuse.as_ref()?)))
        .collect();
    if designed.is_empty() {
        return;
    }
    if designed.iter().any(|(_, d)| d.history) {
        let _ = writeln!(
            md,
            "\n## Shared prefixes and conversation histories (§1)\n\nThe workload's design, recomputed from the schedule: each turn resends its session's earlier turns, so a turn sent to the replica that served an earlier turn of its session could find that turn's whole prompt (its length as the server counted it) in a prefix cache with room, and a request whose shared prefix (if the pool drew one) an earlier request to the same replica sent could find that; its designed reuse is the longer over the prompt tokens the server reported (requests with usage). `analyze --by prefix` segments TTFT by this expectation.\n\n| window | dispatched | shared, seen before | shared, first use | designed reuse |\n|---|---|---|---|---|"
        );
    } else {
        let _ = writeln!(
        md,
        "\n## Shared prefixes (§1)\n\nThe workload's prefix pool, recomputed from the schedule: a request whose shared prefix an earlier request to the same replica sent could find it in a prefix cache with room; its designed reuse is that prefix's length over the prompt tokens the server reported (requests with usage). `analyze --by prefix` segments TTFT by this expectation.\n\n| window | dispatched | shared, seen before | shared, first use | designed reuse |\n|---|---|---|---|---|"
    );
    }
    for (window, d) in designed {
        let _ = writeln!(
            md,
            "| {window} | {} | {} | {} | {} |",
            d.requests,
            d.seen_before,
            d.first_use,
            d.designed_percent
                .map_or("no usage".to_owned(), |x| format!(
                    "{x:.2} % ({} of {} tokens)",
                    d.designed_tokens, d.prompt_tokens
                ))
        );
    }
}

/// A4 (v0.5): the client's time to first token split at the server's clock, per window and
/// source, and each source's signatures once (SPEC §2 "The first token's path").
fn path_lines(md: &mut String, s: &ServerEvidence) {
    let paths: Vec<_> = s
        .windows
        .iter()
        .filter_map(|w| Some((w, w.path.as_ref()?)))
        .collect();
    if !paths.is_empty() {
        let _ = writeln!(
            md,
            "\nThe first token's path at the server's clock (§2, A4):\n"
        );
        for (w, p) in &paths {
            let _ = writeln!(md, "- {} / {}: {}.", w.window, w.source, p.text);
        }
        let sources: Vec<&str> = s.sources.iter().map(|src| src.source.as_str()).collect();
        for source in sources {
            let shown: Vec<_> = paths
                .iter()
                .filter(|(w, _)| w.source == source)
                .filter_map(|(w, p)| Some((w.window, p.signature.as_ref()?)))
                .collect();
            for line in super::path::grouped(&shown) {
                let _ = writeln!(md, "- {source}, {line}");
            }
        }
    }
}

/// Inside the recovery section: the survivors' queue and KV-cache use over the fault window
/// (the outage) and the recovery window, and when the victim's endpoint answered again.
pub(super) fn recovery_evidence(md: &mut String, s: &ServerEvidence, victim: &str) {
    let rows: Vec<&ServerWindow> = s
        .windows
        .iter()
        .filter(|w| matches!(w.window, "fault" | "recovery"))
        .collect();
    let victim_source = s.sources.iter().find(|src| src.source == victim);
    let after = victim_source.and_then(|src| src.first_answer_after_fire_s);
    let silent = victim_source.is_some_and(|src| src.failed > 0);
    if rows.is_empty() && after.is_none() {
        return;
    }
    let _ = writeln!(md, "\n### Server side of the fault and the recovery (§2)\n");
    if !rows.is_empty() {
        let _ = writeln!(
            md,
            "| window | replica | queue | running | KV cache | first token, server / client mean |\n|---|---|---|---|---|---|"
        );
        for w in rows {
            let role = if w.source == victim {
                "victim"
            } else {
                "survivor"
            };
            let _ = writeln!(
                md,
                "| {} | {} ({role}) | {} | {} | {} | {} |",
                w.window,
                w.source,
                gauge(&w.queue, ""),
                gauge(&w.running, ""),
                gauge(&w.kv_cache_percent, " %"),
                means(&w.first_token)
            );
        }
    }
    match after {
        Some(t) => {
            let _ = writeln!(
                md,
                "\n{victim}'s metrics endpoint, silent after the fire, answered again at {t:.3} s: the process behind its address was serving its metrics by then (evidence of readiness where no readiness event was journaled; not a readiness check of the model)."
            );
        }
        None if silent => {
            let _ = writeln!(
                md,
                "\n{victim}'s metrics endpoint failed scrapes and did not answer again after the fire within the run."
            );
        }
        None => {}
    }
}
