//! `report.html`: the page people open first (issue 18 item 6; its order, issue 54 item 5).
//! What the run was leads (target, model, workload, offered rate, date, spec, verdict); then the
//! card with the main window's headline figures: TTFT, TPOT, inter-token and e2e p50 and p99
//! (each p99 with its interval or the reason it has none), requests and output tokens per
//! second, error and censored rates, goodput, and the recovery times with their baseline; then
//! the plots a team reads; then report.md, the auditor's tables, rendered as CommonMark with
//! GitHub tables by pulldown-cmark. Failed and unobserved gates are marked in red; a passing
//! gate in green; bold is only bold. Nothing runs past the page's width: preformatted text
//! wraps, wide tables scroll inside their own box, plots shrink to fit.
//!
//! report.md carries text the run's target wrote (error details, replica names), so the page
//! treats the markdown as untrusted: raw HTML is shown as text and links and images are dropped
//! (their text kept). The page has no script and loads nothing.

use std::fmt::Write as _;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::model::{Distribution, Report, Share, Status};
use crate::plots::escape;

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}\
th{background:#f3f3f3}code{font-size:12px}.plot{margin:1em 0}\
blockquote{margin:1em 0;padding:.5em 1em;border-left:4px solid #1f77b4;background:#f5f8fc}\
.summary{border:2px solid #888;border-radius:6px;padding:.6em 1.2em;margin:1em 0 2em}\
.summary.valid{border-color:#2ca02c}.summary.invalid{border-color:#d62728}\
.summary h2{margin:.2em 0 .5em}.summary table{font-size:14px}\
td.bad{background:#fde2e2;color:#900;font-weight:bold}td.good{color:#1a7f1a}\
p.verdict{font-size:16px;font-weight:bold}.invalid p.verdict{color:#900}.valid p.verdict{color:#1a7f1a}\
pre{white-space:pre-wrap;overflow-wrap:anywhere}table{display:block;max-width:100%;overflow-x:auto}\
svg{max-width:100%;height:auto}table.identity td:first-child{font-weight:bold}\n";

/// Markdown to HTML, untrusted: raw HTML becomes text, links and images keep only their text.
pub fn render(markdown: &str) -> String {
    let events = Parser::new_ext(markdown, Options::ENABLE_TABLES).filter_map(|e| match e {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        Event::Start(Tag::Link { .. } | Tag::Image { .. })
        | Event::End(TagEnd::Link | TagEnd::Image) => None,
        other => Some(other),
    });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events);
    mark_gates(&out)
}

/// Marks the status cells of the gate table: a failed or unobserved gate in red capitals, a
/// passing one in green.
fn mark_gates(html: &str) -> String {
    let mut out = html.to_owned();
    for (status, class, shown) in [
        (Status::Fail, "bad", "FAIL"),
        (Status::Unobserved, "bad", "UNOBSERVED"),
        (Status::Pass, "good", "pass"),
    ] {
        out = out.replace(
            &format!("<td>{}</td>", status.name()),
            &format!("<td class=\"{class}\">{shown}</td>"),
        );
    }
    out
}

/// A latency in µs as people read it: `842 µs`, `12.3 ms`, `1.234 s`.
fn latency(us: f64) -> String {
    if us < 1e3 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.3} s", us / 1e6)
    }
}

fn share(s: &Share) -> String {
    s.value
        .map_or_else(|| "n/a".to_owned(), |v| format!("{:.2} %", v * 100.0))
}

/// One row of the summary's latency table: p50, and p99 with its interval or its refusal.
fn latency_row(out: &mut String, name: &str, d: &Distribution) {
    let at = |q: &str| {
        d.percentiles_us
            .iter()
            .find(|(n, _)| n == q)
            .map(|(_, v)| latency(*v as f64))
    };
    // In the row's own unit: the interval beside the p99, or the refusal. A refused p99 is
    // refused here as in the terminal and the thresholds (issue 54 item 1: the card printed
    // TTFT p99 = 268.0 ms at n = 305 where every other place refused it), never a bare point.
    let p99 = d.tails.iter().find(|t| t.quantile == "p99");
    let tail = p99.map_or_else(
        || "no samples".to_owned(),
        |t| match t.interval_us {
            Some((lo, hi)) => format!(
                "95 % CI {} to {} (order statistics, §7{})",
                latency(lo as f64),
                latency(hi as f64),
                // A4 (v0.5): what the interval rests on.
                t.effective
                    .as_ref()
                    .and_then(|e| e.ratio)
                    .map(|r| format!("; n/n_eff {r:.2}"))
                    .unwrap_or_default()
            ),
            None => t.text.clone(),
        },
    );
    let p99_cell = match p99 {
        Some(t) if t.interval_us.is_none() && d.n > 0 => "refused".to_owned(),
        _ => at("p99").unwrap_or_else(|| "n/a".into()),
    };
    let _ = writeln!(
        out,
        "<tr><th>{name}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        d.n,
        at("p50").unwrap_or_else(|| "n/a".into()),
        p99_cell,
        escape(&tail)
    );
}

/// The summary box.
/// A day count since 1970-01-01 as (year, month, day) in the proleptic Gregorian calendar:
/// shift to eras of 400 years starting on 1 March 0000, where leap days fall at each year's end.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days from 0000-03-01 to 1970-01-01
    let era = z.div_euclid(146_097);
    let of_era = z.rem_euclid(146_097); // [0, 146096]
    let year_of_era = (of_era - of_era / 1460 + of_era / 36_524 - of_era / 146_096) / 365;
    let day_of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // March = 0
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Unix nanoseconds as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// What the run was, first: target, model, workload, offered rate, date, spec, verdict.
fn identity(report: &Report) -> String {
    let id = &report.identity;
    let p = &report.provenance;
    let rows = [
        ("target", format!("{} ({})", id.target, p.target_kind)),
        ("model", id.model.clone()),
        ("workload", id.workload.clone()),
        ("offered rate", format!("{:.2} requests/s", id.rate_rps)),
        ("started", utc(id.started_unix_ns)),
        (
            "spec",
            format!("{} (captured under {})", p.spec_applied, p.spec_at_capture),
        ),
        (
            "verdict",
            if report.validity.valid {
                "VALID"
            } else {
                "INVALID"
            }
            .to_owned(),
        ),
    ];
    let mut out = String::from("<table class=\"identity\">\n");
    for (key, value) in rows {
        let _ = writeln!(out, "<tr><td>{key}</td><td>{}</td></tr>", escape(&value));
    }
    out.push_str("</table>\n");
    out
}

fn summary(report: &Report) -> String {
    let v = &report.validity;
    let mut out = format!(
        "<div class=\"summary {}\">\n<h2>At a glance</h2>\n",
        if v.valid { "valid" } else { "invalid" }
    );
    let failed: Vec<String> = v
        .gates
        .iter()
        .filter(|g| matches!(g.status, Status::Fail | Status::Unobserved))
        .map(|g| format!("{} {}", g.id, g.status.name()))
        .collect();
    let _ = writeln!(
        out,
        "<p class=\"verdict\">{}</p>",
        if v.valid {
            "VALID: every run-invalidating gate holds".to_owned()
        } else {
            escape(&format!(
                "INVALID: {}; no statistic may be published",
                failed.join(", ")
            ))
        }
    );
    if !report.not_publishable.is_empty() {
        out.push_str("<ul>\n");
        for why in &report.not_publishable {
            let _ = writeln!(out, "<li>{}</li>", escape(why));
        }
        out.push_str("</ul>\n");
    }
    let main = report
        .windows
        .iter()
        .find(|w| w.window == "measurement" || w.window == "baseline");
    match (main, &report.windows_withheld) {
        (_, Some(withheld)) => {
            let _ = writeln!(out, "<p>Statistics withheld: {}</p>", escape(withheld));
        }
        (Some(w), None) => {
            let _ = writeln!(
                out,
                "<p>The {} window ({:.3} s to {:.3} s), {} requests scheduled; latencies of completed requests, from the intended send time:</p>\n<table>\n<tr><th></th><th>n</th><th>p50</th><th>p99</th><th>p99 reading (§3, §7)</th></tr>",
                w.window, w.start_s, w.end_s, w.scheduled
            );
            latency_row(&mut out, "TTFT", &w.ttft);
            latency_row(&mut out, "TPOT", &w.tokens.tpot);
            latency_row(&mut out, "inter-token", &w.inter_chunk);
            latency_row(&mut out, "end to end", &w.e2e);
            let rate = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2}"));
            // A4: each goodput named by its SLO, with its interval (§4 "A declared SLO").
            let with = |s: &Share, i: Option<&crate::model::ShareInterval>| {
                let ci = i
                    .and_then(|i| i.interval)
                    .map_or_else(String::new, |(lo, hi)| {
                        format!(" (95 % CI {:.2}-{:.2} %)", lo * 100.0, hi * 100.0)
                    });
                format!("{}{ci}", share(s))
            };
            let (head, cells) = match (&w.goodput_interval, &w.declared_goodput) {
                (None, _) => (
                    "<th>SLO goodput</th>".to_owned(),
                    format!("<td>{}</td>", share(&w.goodput)),
                ),
                (Some(i), declared) => {
                    let pinned = format!("<td>{}</td>", with(&w.goodput, Some(i)));
                    match declared {
                        None => ("<th>goodput, pinned SLO (§4)</th>".to_owned(), pinned),
                        Some(d) => (
                            format!(
                                "<th>goodput, your SLO ({})</th><th>goodput, pinned SLO (§4)</th>",
                                escape(&d.slo)
                            ),
                            format!("<td>{}</td>{pinned}", with(&d.goodput, Some(&d.interval))),
                        ),
                    }
                }
            };
            let _ = writeln!(
                out,
                "</table>\n<table>\n<tr><th>requests/s</th><th>output tokens/s</th><th>errored</th><th>censored</th>{head}</tr>\n<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{cells}</tr>\n</table>",
                rate(w.throughput_rps.value),
                rate(w.tokens.output_tokens_per_s),
                share(&w.error_rate),
                share(&w.censored_rate),
            );
        }
        (None, None) => out.push_str("<p>No measured window.</p>\n"),
    }
    if let Some(r) = &report.recovery {
        let _ = writeln!(
            out,
            "<table>\n<tr><th>recovery ({})</th><th></th></tr>\n<tr><td>pre-fault baseline goodput</td><td>{}</td></tr>\n<tr><td>back to the pre-fault baseline</td><td>{}</td></tr>\n<tr><td>to the single-replica equilibrium</td><td>{}</td></tr>\n</table>",
            escape(&r.variant),
            r.pre_fault_baseline
                .goodput
                .map_or_else(|| "n/a".to_owned(), |g| format!("{:.2} %", g * 100.0)),
            escape(&r.to_pre_fault.text),
            escape(&r.to_equilibrium.text)
        );
    }
    if !report.headline.is_empty() {
        let _ = writeln!(out, "<blockquote>{}</blockquote>", escape(&report.headline));
    }
    out.push_str("</div>\n");
    out
}

/// `report.html`: what the run was, the card, the plots, then `markdown` rendered (the
/// auditor's tables); self-contained (no script, no network, no external file).
pub fn page(report: &Report, markdown: &str, plots: &[(&'static str, String)]) -> String {
    let mut body = render(markdown);
    let mut lead = identity(report);
    lead.push_str(&summary(report));
    if !plots.is_empty() {
        lead.push_str("<h2>Plots</h2>\n");
    }
    for (name, svg) in plots {
        let _ = writeln!(
            lead,
            "<div class=\"plot\" id=\"{}\">{svg}</div>",
            name.trim_end_matches(".svg")
        );
    }
    // After the title, before the markdown's own first line.
    let at = body.find("</h1>").map_or(0, |i| i + "</h1>".len() + 1);
    body.insert_str(at.min(body.len()), &lead);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>percentes report</title>\n<style>\n{STYLE}</style></head><body>\n{body}</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_markdown_cannot_inject_markup_or_links() {
        let md = "# t\n\nA detail: <script>alert(1)</script> and <img src=x onerror=y>\n\n[click](javascript:alert(1)) ![i](http://x/y.png) <http://evil.example>\n";
        let html = render(md);
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<a "), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(html.contains("click"), "the link's text stays: {html}");
    }

    #[test]
    fn tables_blockquotes_and_gate_statuses_render() {
        let md = "| gate | status |\n|---|---|\n| G2.4 | fail |\n| G6 | pass |\n| G5 | unobserved |\n\n> the headline, not a literal marker\n\n**bold**\n";
        let html = render(md);
        assert!(
            html.contains("<table>") && html.contains("<th>gate</th>"),
            "{html}"
        );
        assert!(html.contains("<td class=\"bad\">FAIL</td>"), "{html}");
        assert!(html.contains("<td class=\"bad\">UNOBSERVED</td>"), "{html}");
        assert!(html.contains("<td class=\"good\">pass</td>"), "{html}");
        assert!(html.contains("<blockquote>"), "{html}");
        assert!(!html.contains("&gt; the headline"), "{html}");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(
            !STYLE.contains("strong{color"),
            "bold is not styled as an alarm"
        );
    }

    /// The card's p99 is refused where §7 refuses it (no interval from the sample), as the
    /// terminal and the thresholds refuse it, and shown with its interval where there is one.
    #[test]
    fn a_refused_p99_is_refused_on_the_card_too() {
        use crate::model::Tail;
        let mut d = crate::analysis::distribution(&[100_000; 305], None);
        d.percentiles_us = vec![("p50".into(), 100_000), ("p99".into(), 268_000)];
        d.tails = vec![Tail {
            quantile: "p99".into(),
            point_us: Some(268_000),
            interval_us: None,
            ranks: None,
            text: "p99-CI omitted (sample budget insufficient, §7)".into(),
            effective: None,
        }];
        let mut row = String::new();
        latency_row(&mut row, "TTFT", &d);
        assert!(
            row.contains("<td>refused</td>") && !row.contains("268"),
            "{row}"
        );
        assert!(row.contains("sample budget insufficient"), "{row}");
        d.tails[0].interval_us = Some((250_000, 290_000));
        let mut row = String::new();
        latency_row(&mut row, "TTFT", &d);
        assert!(
            row.contains("<td>268.0 ms</td>") && row.contains("95 % CI"),
            "{row}"
        );
    }

    #[test]
    fn latencies_read_in_their_unit() {
        assert_eq!(latency(842.0), "842 µs");
        assert_eq!(latency(12_345.0), "12.3 ms");
        assert_eq!(latency(1_234_000.0), "1.234 s");
    }

    /// Known dates: the Unix epoch, a leap day, the day this was written, and one before 1970.
    #[test]
    fn unix_times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400 * 1_000_000_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(
            utc(1_796_491_983 * 1_000_000_000 + 999_999_999),
            "2026-12-05 17:33:03 UTC"
        );
        assert_eq!(utc(-86_400 * 1_000_000_000), "1969-12-31 00:00:00 UTC");
        assert_eq!(civil(-719_468), (0, 3, 1));
    }

    /// Issue 54 item 5: the page's order is what the run was, the card with every headline
    /// figure, the plots, then the auditor's tables; the card is not a second "Summary".
    #[test]
    fn the_page_leads_with_the_run_then_its_figures_then_the_plots() {
        use percentes_formats::journal::synthetic;
        let bytes = synthetic::bytes(&synthetic::golden_config(), &synthetic::Options::default());
        let scratch = percentes_testkit::Scratch::new("html");
        let path = scratch.join("run.pj");
        std::fs::write(&path, bytes).unwrap();
        let file = crate::JournalFile::open(&path).unwrap();
        let run = crate::load::load(&file).unwrap();
        // The synthetic journal leaves G2.4 unobserved: diagnosed, its windows are shown.
        let mut report = crate::analysis::analyze(
            &run,
            &file,
            percentes_formats::spec::Spec::CURRENT,
            &crate::model::Analyzer {
                diagnose: true,
                ..Default::default()
            },
        );
        report.identity = crate::model::Identity {
            target: "http://10.0.0.7:8000".into(),
            model: "tiny-llama".into(),
            workload: "open loop, poisson arrivals".into(),
            rate_rps: 8.0,
            started_unix_ns: 0,
        };
        let md = "# percentes report\n\n## Summary\n\ntext\n\n## Validity (§2, §10): VALID\n";
        let html = page(&report, md, &[("latency.svg", "<svg></svg>".into())]);
        let at = |needle: &str| {
            html.find(needle)
                .unwrap_or_else(|| panic!("{needle}: {html}"))
        };
        assert!(at("http://10.0.0.7:8000") < at("<h2>At a glance</h2>"));
        assert!(at("1970-01-01 00:00:00 UTC") < at("<h2>At a glance</h2>"));
        assert!(at("<h2>At a glance</h2>") < at("<div class=\"plot\" id=\"latency\">"));
        assert!(at("<div class=\"plot\" id=\"latency\">") < at("<h2>Validity"));
        for figure in [
            "requests/s",
            "output tokens/s",
            "inter-token",
            "TPOT",
            "goodput",
        ] {
            assert!(html.contains(figure), "{figure}: {html}");
        }
        assert_eq!(html.matches("<h2>Summary</h2>").count(), 1);
    }
}
