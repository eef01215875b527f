//! The figures a terminal shows at the end of `record` and `analyze` (issue 37 item 1), their
//! JSON (`summary.json`, `record --json`), and the user's thresholds checked against them
//! (item 4, SPEC §9 "Thresholds"). Everything here restates the report: a figure is read from a
//! [`WindowReport`], with the refusal the report gives it, and nothing is computed afresh.

use std::fmt::Write as _;

use percentes_formats::config::thresholds::{Kind, Threshold};
use serde::Serialize;

use crate::model::{Distribution, Report, Share, ShareInterval, WindowReport};

/// The schema of `summary.json`.
pub const SCHEMA: &str = "percentes-summary/1";

/// The latency rows, in the order shown: (metric prefix, row label). The A4 rows (time to first
/// answer token, reasoning span) appear only under v0.5 and where the window has any.
const LATENCY_ROWS: [(&str, &str); 6] = [
    ("ttft", "TTFT"),
    ("ttfat", "first answer"),
    ("reasoning", "reasoning"),
    ("tpot", "TPOT"),
    ("itl", "inter-token"),
    ("e2e", "end to end"),
];
/// The rows shown only where the window has samples of them.
const STREAM_ROWS: [&str; 2] = ["ttfat", "reasoning"];

/// The quantiles kept per latency (the report's own), and the three a terminal row shows.
const KEPT: [&str; 4] = ["p50", "p90", "p95", "p99"];
const SHOWN: [&str; 3] = ["p50", "p90", "p99"];

/// What a run's end shows: its verdict and each window's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Whether every run-invalidating gate holds.
    pub valid: bool,
    /// The gates that failed or went unobserved, `G2.3 fail`.
    pub failed_gates: Vec<String>,
    /// The report's NOT PUBLISHABLE reasons.
    pub not_publishable: Vec<String>,
    /// Why the windows are withheld (an invalid run without `--diagnose`).
    pub withheld: Option<String>,
    /// The workload model when it is not open loop, in one line (issue 54 item 6: a closed
    /// run's summary never said it was one, and its requests per second read like an offered
    /// rate). Absent for an open-loop run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The windows, in the report's order.
    pub windows: Vec<WindowFigures>,
    /// A4 (v0.5): where the baseline's time to first token went, in one line (SPEC §2 "The
    /// first token's path"); absent under v0.1-v0.4 and where no window was decomposed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_token_path: Option<String>,
    /// A4 (v0.5): the testbed change the run's timeline holds, in one line (SPEC §10 "Reading
    /// a testbed change"); absent for a run without one and under v0.1-v0.4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    /// v0.5: what the server's own metrics say, one line per scraped source (SPEC §2
    /// "Server-side evidence"); absent under v0.1-v0.4 and where nothing was scraped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<String>,
    /// The thresholds checked, in the order given.
    pub thresholds: Vec<Verdict>,
}

/// One window's figures.
#[derive(Clone, Debug, Serialize)]
pub struct WindowFigures {
    /// The window's name.
    pub window: String,
    /// Its start, s from the epoch.
    pub start_s: f64,
    /// Its end, s from the epoch.
    pub end_s: f64,
    /// Requests scheduled in it.
    pub scheduled: u64,
    /// Completed, errored, censored.
    pub completed: u64,
    /// Errored.
    pub errored: u64,
    /// Censored.
    pub censored: u64,
    /// A4 (v0.5): abandoned by design (SPEC §1 "Abandonment"; absent when none).
    #[serde(skip_serializing_if = "crate::model::is_zero")]
    pub abandoned: u64,
    /// Every figure, by metric name (`ttft_p99`, `error_rate`).
    pub figures: Vec<Figure>,
    /// The completion curve's readings in §3's words (over every scheduled request).
    pub completion: Vec<String>,
    /// The §3 caveat when errored + censored is above 5 %.
    pub caveat: Option<String>,
    /// A4 (v0.5): the inter-token gaps at the 1 us floor, the read's resolution, and all gaps:
    /// stated wherever the inter-token figure appears.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inter_token_floor: Option<(u64, u64)>,
    /// A4 (v0.5): the declared SLO the `goodput` figure is read under (SPEC §4 "A declared
    /// SLO"); absent where there is none, and `goodput` is the pinned SLO's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_slo: Option<String>,
    /// A4 (v0.5): the completed requests the declared SLO could not judge, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unjudged: Option<String>,
}

/// One figure, or its refusal.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    /// The metric's name, as a threshold names it.
    pub name: String,
    /// `s`, `share` or `per_s`.
    pub unit: &'static str,
    /// The sample it rests on.
    pub n: u64,
    /// Its value, absent when refused.
    pub value: Option<f64>,
    /// The §7 95 % interval of a tail quantile, or (A4) of a goodput, where the report gives
    /// one.
    pub interval: Option<(f64, f64)>,
    /// Why there is no value (or, for a tail, no interval), in the report's words.
    pub refused: Option<String>,
    /// A4 (v0.5): n / n_eff of a tail's interval (§7), printed beside it. Absent before v0.5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_per_effective: Option<f64>,
}

/// One threshold's result.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// The threshold as written.
    pub threshold: String,
    /// The window read.
    pub window: String,
    /// The figure's value, when there is one.
    pub value: Option<f64>,
    /// Whether it holds.
    pub passed: bool,
    /// Why not, or what was read.
    pub reason: String,
}

impl Summary {
    /// Whether every threshold holds (true when there are none).
    pub fn thresholds_hold(&self) -> bool {
        self.thresholds.iter().all(|v| v.passed)
    }

    /// SPEC §10's exit status for a run `valid` or not: 2 for a gate-invalid run, else 3 when
    /// a user's threshold failed (§9 "Thresholds"), else 0.
    pub fn exit_status(&self, valid: bool) -> u8 {
        match (valid, self.thresholds_hold()) {
            (false, _) => 2,
            (true, false) => 3,
            (true, true) => 0,
        }
    }
}

/// The summary of a report, with `thresholds` checked against it.
pub fn of(report: &Report, thresholds: &[Threshold]) -> Summary {
    let v = &report.validity;
    let mut summary = Summary {
        schema: SCHEMA,
        valid: v.valid,
        failed_gates: v
            .failed()
            .map(|g| format!("{} {}", g.id, g.status.name()))
            .collect(),
        not_publishable: report.not_publishable.clone(),
        withheld: report.windows_withheld.clone(),
        workload: workload_line(&report.workload, report.history),
        windows: report.windows.iter().map(window).collect(),
        first_token_path: path_line(report),
        change: report.change.as_ref().map(|c| c.text.clone()),
        server: server_lines(report),
        thresholds: Vec::new(),
    };
    summary.thresholds = thresholds.iter().map(|t| check(&summary, t)).collect();
    summary
}

/// A workload model other than open loop, as the summary's first line says it (SPEC §1
/// "Workload models").
fn workload_line(
    workload: &percentes_formats::schedule::Workload,
    history: Option<percentes_formats::schedule::History>,
) -> Option<String> {
    use percentes_formats::schedule::Workload;
    match workload {
        Workload::SemiOpen { turns, .. } if history.is_some() => Some(format!("workload: semi-open, sessions of {turns} requests arriving open loop, each turn after the last one's end, resending the session's earlier turns (§1 \"Workload models\", \"Conversation histories\")")),
        Workload::Open => None,
        Workload::Closed { users, .. } => Some(format!("workload: closed loop, {users} users: the requests per second below are an outcome, not an offered rate, and the latency is not latency at a fixed rate (§1 \"Workload models\")")),
        Workload::SemiOpen { turns, .. } => Some(format!("workload: semi-open, sessions of {turns} requests arriving open loop, each turn after the last one's end (§1 \"Workload models\")")),
        Workload::Replay { offsets_ns } => Some(format!("workload: a replay of a trace's times, {} requests (§1 \"Workload models\")", offsets_ns.len())),
    }
}

fn window(w: &WindowReport) -> WindowFigures {
    let mut figures = Vec::new();
    // Up to v0.4 the inter-token figure is per token; under A4, per delivery (the pooled
    // inter-chunk distribution, with its refusals at the read's floor).
    let itl = w.tokens.itl_per_token.as_ref().unwrap_or(&w.inter_chunk);
    let mut latencies = vec![
        ("ttft", &w.ttft),
        ("tpot", &w.tokens.tpot),
        ("itl", itl),
        ("e2e", &w.e2e),
    ];
    if let Some(s) = &w.streams {
        latencies.push(("ttfat", &s.ttfat));
        latencies.push(("reasoning", &s.reasoning_span));
    }
    for (prefix, distribution) in latencies {
        for q in KEPT {
            let mut figure = latency(format!("{prefix}_{q}"), q, distribution);
            // A4: completions with no gap between deliveries are not "none completed".
            if prefix == "itl"
                && distribution.n == 0
                && w.outcomes.completed > 0
                && let Some(s) = &w.streams
            {
                figure.refused = Some(format!(
                    "no gap to read: each of the {} completed responses came in one delivery ({} deliveries in all)",
                    w.outcomes.completed, s.deliveries
                ));
            }
            figures.push(figure);
        }
    }
    if let Some(s) = &w.streams {
        figures.extend(reasoning_tokens(s));
    }
    figures.extend(shares_and_rates(w));
    WindowFigures {
        window: w.window.to_owned(),
        start_s: w.start_s,
        end_s: w.end_s,
        scheduled: w.scheduled,
        completed: w.outcomes.completed,
        errored: w.outcomes.errored,
        censored: w.outcomes.censored,
        abandoned: w.outcomes.abandoned,
        figures,
        completion: w
            .completion
            .readings
            .iter()
            .map(|r| r.text.clone())
            .collect(),
        caveat: w.caveat.clone(),
        inter_token_floor: w
            .streams
            .as_ref()
            .and(w.inter_chunk_at_floor.as_ref())
            .map(|f| ((f.value.unwrap_or(0.0) * f.n as f64).round() as u64, f.n)),
        declared_slo: w.declared_goodput.as_ref().map(|d| d.slo.clone()),
        unjudged: w.declared_goodput.as_ref().and_then(unjudged_line),
    }
}

/// The completion curve's readings, the window's shares and its rates.
fn shares_and_rates(w: &WindowReport) -> Vec<Figure> {
    let mut figures = Vec::new();
    for reading in &w.completion.readings {
        figures.push(Figure {
            name: format!("completion_{}", reading.quantile),
            unit: "s",
            n: w.completion.n,
            value: reading.seconds,
            interval: None,
            refused: reading.seconds.is_none().then(|| reading.text.clone()),
            n_per_effective: None,
        });
    }
    for (name, share) in [
        ("error_rate", &w.error_rate),
        ("censored_rate", &w.censored_rate),
    ] {
        figures.push(of_share(name, "share", share));
    }
    figures.extend(goodputs(w));
    figures.push(of_share("requests_per_s", "per_s", &w.throughput_rps));
    figures.push(Figure {
        name: "output_tokens_per_s".into(),
        unit: "per_s",
        n: w.tokens.with_usage,
        value: w.tokens.output_tokens_per_s,
        interval: None,
        refused: w
            .tokens
            .output_tokens_per_s
            .is_none()
            .then(|| w.tokens.text.clone()),
        n_per_effective: None,
    });
    figures
}

/// A4: the usage's reasoning tokens by quantile, refused where no request reported them.
fn reasoning_tokens(s: &crate::model::StreamFigures) -> Vec<Figure> {
    KEPT.iter()
        .map(|q| {
            let value = s.reasoning_tokens.percentiles.iter().find(|(n, _)| n == q);
            Figure {
                name: format!("reasoning_tokens_{q}"),
                unit: "tokens",
                n: s.reasoning_tokens.n,
                value: value.map(|(_, v)| *v as f64),
                interval: None,
                refused: value.is_none().then(|| {
                    "no completed request of the window reported reasoning tokens".to_owned()
                }),
                n_per_effective: None,
            }
        })
        .collect()
}

/// The declared SLO's unjudged requests in one line, `None` where there are none.
fn unjudged_line(d: &crate::model::DeclaredGoodput) -> Option<String> {
    if d.unjudged.is_empty() {
        return None;
    }
    let each: Vec<String> = d
        .unjudged
        .iter()
        .map(|(metric, n)| format!("{n} on {metric}"))
        .collect();
    Some(format!(
        "not judged, so not counted as meeting your SLO: {} (the journal holds no value of that metric for them; §4 \"A declared SLO\")",
        each.join(", ")
    ))
}

/// `goodput`: under the declared SLO where the configuration declares one (SPEC §4, A4), else
/// under the pinned one; and under A4 `pinned_goodput`, always the pinned SLO's. Each with its
/// interval where the report gives one.
fn goodputs(w: &WindowReport) -> Vec<Figure> {
    let with = |name: &str, share: &Share, interval: Option<&ShareInterval>| {
        let mut figure = of_share(name, "share", share);
        if let Some(i) = interval {
            figure.interval = i.interval;
            figure.n_per_effective = i.n_per_effective;
            if figure.value.is_some() {
                figure.refused = i.refused.clone();
            }
        }
        figure
    };
    let pinned = with("goodput", &w.goodput, w.goodput_interval.as_ref());
    let Some(interval) = &w.goodput_interval else {
        return vec![pinned];
    };
    let own = match &w.declared_goodput {
        Some(d) => with("goodput", &d.goodput, Some(&d.interval)),
        None => pinned.clone(),
    };
    vec![
        own,
        Figure {
            name: "pinned_goodput".into(),
            ..with("goodput", &w.goodput, Some(interval))
        },
    ]
}

fn of_share(name: &str, unit: &'static str, share: &Share) -> Figure {
    Figure {
        name: name.into(),
        unit,
        n: share.n,
        value: share.value,
        interval: None,
        refused: share
            .value
            .is_none()
            .then(|| format!("nothing to divide by ({})", share.label)),
        n_per_effective: None,
    }
}

/// A completed-only quantile: the report's percentile, and for p95 and p99 the §7 interval or
/// its refusal (a tail is never published as a bare point, §7). Pooled inter-token gaps keep no
/// order statistics and carry no interval; their tails are read as the report prints them.
fn latency(name: String, q: &str, d: &Distribution) -> Figure {
    if let Some((_, why)) = d.refused.iter().find(|(r, _)| r == q) {
        return Figure {
            name,
            unit: "s",
            n: d.n,
            value: None,
            interval: None,
            refused: Some(why.clone()),
            n_per_effective: None,
        };
    }
    let value = d
        .percentiles_us
        .iter()
        .find(|(n, _)| n == q)
        .map(|(_, us)| *us as f64 / 1e6);
    let mut figure = Figure {
        name,
        unit: "s",
        n: d.n,
        value,
        interval: None,
        refused: (d.n == 0).then(|| "none completed in the window".to_owned()),
        n_per_effective: None,
    };
    if let Some(tail) = d.tails.iter().find(|t| t.quantile == q) {
        figure.n_per_effective = tail.effective.as_ref().and_then(|e| e.ratio);
        match tail.interval_us {
            Some((lo, hi)) => figure.interval = Some((lo as f64 / 1e6, hi as f64 / 1e6)),
            None if d.n > 0 => {
                figure.value = None;
                figure.refused = Some(tail.text.clone());
            }
            None => {}
        }
    }
    figure
}

/// The window a threshold reads: the one it names, else `measurement`, else `baseline`.
fn main_window<'a>(
    summary: &'a Summary,
    named: Option<&'a str>,
) -> Result<&'a WindowFigures, NoWindow<'a>> {
    let find = |name: &str| summary.windows.iter().find(|w| w.window == name);
    match named {
        Some(name) => find(name).ok_or(NoWindow::Named { name, summary }),
        None => find("measurement")
            .or_else(|| find("baseline"))
            .ok_or(NoWindow::Main),
    }
}

/// The window a threshold reads is not in the run.
enum NoWindow<'a> {
    /// The one it names, beside the run's own.
    Named {
        /// The name.
        name: &'a str,
        /// The run's figures, which name its windows.
        summary: &'a Summary,
    },
    /// Neither `measurement` nor `baseline`, where it names none.
    Main,
}

impl std::fmt::Display for NoWindow<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoWindow::Named { name, summary } => {
                let names: Vec<&str> = summary.windows.iter().map(|w| w.window.as_str()).collect();
                write!(
                    f,
                    "this run has no window `{name}` (it has {})",
                    names.join(", ")
                )
            }
            NoWindow::Main => {
                f.write_str("this run has no measurement or baseline window; name one with @WINDOW")
            }
        }
    }
}

/// One threshold against the summary: a withheld or refused figure fails it, with the reason.
fn check(summary: &Summary, t: &Threshold) -> Verdict {
    let fail = |window: &str, reason: String| Verdict {
        threshold: t.text.clone(),
        window: window.to_owned(),
        value: None,
        passed: false,
        reason,
    };
    let named = t.window.as_deref().unwrap_or("measurement or baseline");
    if let Some(withheld) = &summary.withheld {
        return fail(named, format!("no figure is published: {withheld}"));
    }
    let w = match main_window(summary, t.window.as_deref()) {
        Ok(w) => w,
        Err(missing) => return fail(named, missing.to_string()),
    };
    if !summary.valid {
        let why = format!(
            "the run is invalid ({}): its figures are a diagnosis, not published",
            summary.failed_gates.join(", ")
        );
        return fail(&w.window, why);
    }
    // Before v0.5 the one goodput is the pinned SLO's.
    let named = |name: &str| w.figures.iter().find(|f| f.name == name);
    let pinned = (t.metric == "pinned_goodput")
        .then(|| named("goodput"))
        .flatten();
    let found = named(&t.metric).or(pinned);
    let Some(figure) = found else {
        return fail(&w.window, missing(&t.metric));
    };
    let Some(value) = figure.value else {
        let why = figure.refused.clone().unwrap_or_default();
        return fail(&w.window, format!("refused: {why}"));
    };
    let passed = t.op.holds(value, t.limit);
    let mut reason = format!("{} = {}", t.metric, shown(t.kind, value));
    if let Some((lo, hi)) = figure.interval {
        let _ = write!(
            reason,
            " (95 % CI {}-{}{})",
            shown(t.kind, lo),
            shown(t.kind, hi),
            figure
                .n_per_effective
                .map(|r| format!("; n/n_eff {r:.2}"))
                .unwrap_or_default()
        );
        if t.op.holds(lo, t.limit) != t.op.holds(hi, t.limit) {
            reason.push_str(", the interval straddles the limit");
        }
    }
    let _ = write!(reason, ", n = {}", figure.n);
    Verdict {
        threshold: t.text.clone(),
        window: w.window.clone(),
        value: Some(value),
        passed,
        reason,
    }
}

/// Why a threshold's metric has no figure in its window.
fn missing(metric: &str) -> String {
    if ["ttfat_", "reasoning_"]
        .iter()
        .any(|p| metric.starts_with(p))
    {
        format!("no figure `{metric}` in the window: it is a reading of spec v0.5 on (A4), and this analysis applied an earlier version")
    } else {
        format!("no figure `{metric}` in the window")
    }
}

fn shown(kind: Kind, value: f64) -> String {
    match kind {
        Kind::Latency => latency_text(value, unit_for(value)),
        Kind::Share => format!("{:.2} %", value * 100.0),
        Kind::Rate => format!("{value:.2}/s"),
        Kind::Count => format!("{value:.0} tokens"),
    }
}

/// The unit a row of latencies is printed in, from its largest value: one unit per row.
fn unit_for(seconds: f64) -> (&'static str, f64) {
    if seconds >= 1.0 {
        ("s", 1.0)
    } else if seconds >= 1e-3 {
        ("ms", 1e3)
    } else {
        ("µs", 1e6)
    }
}

fn latency_text(seconds: f64, (unit, scale): (&'static str, f64)) -> String {
    match unit {
        "s" => format!("{:.3} s", seconds * scale),
        // A value far below its row's unit keeps its digits: 0.0010 ms, not 0.00 ms.
        "ms" if seconds < 1e-5 => format!("{:.4} ms", seconds * scale),
        "ms" => format!("{:.2} ms", seconds * scale),
        _ => format!("{:.0} µs", seconds * scale),
    }
}

/// The summary as a terminal shows it (and report.md leads with): per window, the latency rows
/// with p50, p90 and p99 (its interval or its refusal), the completion curve's readings, the
/// rates; then the thresholds.
pub fn text(summary: &Summary) -> String {
    let mut out = String::new();
    if let Some(workload) = &summary.workload {
        let _ = writeln!(out, "{workload}");
    }
    if let Some(withheld) = &summary.withheld {
        let _ = writeln!(out, "statistics withheld: {withheld}");
    }
    if !summary.valid && summary.withheld.is_none() && !summary.windows.is_empty() {
        let _ = writeln!(
            out,
            "INVALID RUN: the figures below are a diagnosis, NOT PUBLISHABLE"
        );
    }
    for w in &summary.windows {
        if w.window == "warm-up" {
            // Not measured (§1): one line here; summary.json keeps its figures.
            let _ = writeln!(
                out,
                "warm-up {:.3}-{:.3} s: {} scheduled, not measured (§1)",
                w.start_s, w.end_s, w.scheduled
            );
            continue;
        }
        window_text(&mut out, w);
    }
    if let Some(line) = &summary.first_token_path {
        let _ = writeln!(out, "{line}");
    }
    if let Some(line) = &summary.change {
        let _ = writeln!(out, "{line}");
    }
    for line in &summary.server {
        let _ = writeln!(out, "{line}");
    }
    if !summary.thresholds.is_empty() {
        let failed = summary.thresholds.iter().filter(|v| !v.passed).count();
        let _ = writeln!(
            out,
            "thresholds: {} of {} hold",
            summary.thresholds.len() - failed,
            summary.thresholds.len()
        );
        for v in &summary.thresholds {
            let _ = writeln!(
                out,
                "  {} {} [{}]: {}",
                if v.passed { "PASS" } else { "FAIL" },
                v.threshold,
                v.window,
                v.reason
            );
        }
    }
    out
}

fn window_text(out: &mut String, w: &WindowFigures) {
    if w.scheduled == 0 {
        let _ = writeln!(
            out,
            "{} {:.3}-{:.3} s: no request scheduled, nothing to estimate",
            w.window, w.start_s, w.end_s
        );
        return;
    }
    let _ = writeln!(
        out,
        "{} {:.3}-{:.3} s: {} scheduled, {} completed, {} errored, {} censored{}",
        w.window,
        w.start_s,
        w.end_s,
        w.scheduled,
        w.completed,
        w.errored,
        w.censored,
        match w.abandoned {
            0 => String::new(),
            n => format!(", {n} abandoned by design (§1)"),
        }
    );
    let figure = |name: String| w.figures.iter().find(|f| f.name == name);
    let _ = writeln!(
        out,
        "  {:<12} {:>6}  {:>11}  {:>11}  p99",
        "", "n", "p50", "p90"
    );
    latency_rows(out, w);
    let _ = writeln!(
        out,
        "  completion curve, all scheduled (§3): {}",
        w.completion.join("; ")
    );
    let rate = |name: &str| {
        figure(name.to_owned()).map_or_else(
            || "n/a".to_owned(),
            |f| match (f.value, f.unit) {
                (Some(v), "share") => format!("{:.2} %", v * 100.0),
                (Some(v), _) => format!("{v:.2}"),
                (None, _) => "n/a".to_owned(),
            },
        )
    };
    let rates = format!(
        "  {} requests/s, {} output tokens/s; errored {}, censored {}",
        rate("requests_per_s"),
        rate("output_tokens_per_s"),
        rate("error_rate"),
        rate("censored_rate"),
    );
    goodput_lines(out, w, rates, &rate);
    if w.abandoned > 0 {
        let _ = writeln!(
            out,
            "  the {} abandoned by design count in no censored rate and, not having completed, as not meeting an SLO; the completion curve censors each at its instant (§1 \"Abandonment\")",
            w.abandoned
        );
    }
    if let Some(caveat) = &w.caveat {
        let _ = writeln!(out, "  {caveat}");
    }
}

/// A window's rates and goodputs as the terminal prints them: under A4 each goodput named by its
/// SLO, with its interval (§4 "A declared SLO"); before, the one "SLO goodput".
fn goodput_lines(
    out: &mut String,
    w: &WindowFigures,
    rates: String,
    rate: &dyn Fn(&str) -> String,
) {
    let figure = |name: &str| w.figures.iter().find(|f| f.name == name);
    let with_interval = |name: &str| {
        let mut text = rate(name);
        if let Some((lo, hi)) = figure(name).and_then(|f| f.interval) {
            let _ = write!(text, " (95 % CI {:.2}-{:.2} %)", lo * 100.0, hi * 100.0);
        }
        text
    };
    // A4: each goodput named by its SLO, with its interval (§4 "A declared SLO").
    let pinned = format!(
        "the pinned SLO (§4: TTFT <= {} ms, e2e <= {} s)",
        percentes_formats::pins::value::SLO_TTFT_MS,
        percentes_formats::pins::value::SLO_E2E_MS / 1000
    );
    match (&w.declared_slo, figure("pinned_goodput").is_some()) {
        (_, false) => {
            let _ = writeln!(out, "{rates}, SLO goodput {}", rate("goodput"));
        }
        (None, true) => {
            let _ = writeln!(
                out,
                "{rates}, goodput {} under {pinned}",
                with_interval("pinned_goodput")
            );
        }
        (Some(slo), true) => {
            let _ = writeln!(out, "{rates}");
            let _ = writeln!(
                out,
                "  goodput {} under your SLO ({slo}); {} under {pinned}",
                with_interval("goodput"),
                with_interval("pinned_goodput")
            );
            if let Some(note) = &w.unjudged {
                let _ = writeln!(out, "  {note}");
            }
        }
    }
}

/// The latency rows of a window's text, and (A4) its reasoning tokens.
fn latency_rows(out: &mut String, w: &WindowFigures) {
    let figure = |name: String| w.figures.iter().find(|f| f.name == name);
    for (prefix, label) in LATENCY_ROWS {
        let row: Vec<&Figure> = SHOWN
            .iter()
            .filter_map(|q| figure(format!("{prefix}_{q}")))
            .collect();
        // A4's rows only where they say something the TTFT row does not.
        if row.is_empty() || (STREAM_ROWS.contains(&prefix) && !news(w, prefix)) {
            continue;
        }
        // A4: the gaps at the read's resolution said beside the inter-token figure.
        let floor = w
            .inter_token_floor
            .filter(|(count, _)| *count > 0 && prefix == "itl")
            .map(|(count, n)| {
                format!(
                    "{:.1} % of gaps at the 1 us floor",
                    count as f64 * 100.0 / n.max(1) as f64
                )
            });
        latency_row(out, label, &row, floor);
    }
    let tokens: Vec<String> = SHOWN
        .iter()
        .filter_map(|q| figure(format!("reasoning_tokens_{q}")))
        .filter_map(|f| Some(format!("{:.0}", f.value?)))
        .collect();
    if let [p50, p90, p99] = &tokens[..] {
        let _ = writeln!(
            out,
            "  reasoning tokens (usage) p50 {p50}, p90 {p90}, p99 {p99}"
        );
    }
}

/// Whether an A4 row (`ttfat`, `reasoning`) of window `w` says something: samples, and for the
/// time to first answer token, a figure other than the TTFT row's (a plain stream's first answer
/// token is its first token).
fn news(w: &WindowFigures, prefix: &str) -> bool {
    let of = |name: String| w.figures.iter().find(|f| f.name == name);
    SHOWN.iter().any(|q| {
        let this = of(format!("{prefix}_{q}"));
        let ttft = of(format!("ttft_{q}"));
        this.is_some_and(|f| f.n > 0)
            && (prefix != "ttfat" || this.map(|f| (f.n, f.value)) != ttft.map(|f| (f.n, f.value)))
    })
}

/// One latency row: n, p50, p90 and the p99 with its interval or its refusal, in one unit.
fn latency_row(out: &mut String, label: &str, row: &[&Figure], note: Option<String>) {
    let n = row.first().map_or(0, |f| f.n);
    if n == 0 {
        let why = row
            .first()
            .and_then(|f| f.refused.as_deref())
            .filter(|why| why.starts_with("no gap"))
            .unwrap_or("none completed");
        let _ = writeln!(out, "  {label:<12} {n:>6}  {why}");
        return;
    }
    // Refused as a whole (A4: gaps mostly at the read's floor): the reason once.
    if let Some(why) = row.first().and_then(|f| f.refused.as_ref()).filter(|why| {
        row.iter()
            .all(|f| f.value.is_none() && f.refused.as_ref() == Some(why))
    }) {
        let _ = writeln!(out, "  {label:<12} {n:>6}  {why}");
        return;
    }
    let largest = row
        .iter()
        .flat_map(|f| f.value.into_iter().chain(f.interval.map(|i| i.1)))
        .fold(0.0f64, f64::max);
    let unit = unit_for(largest);
    let cell = |f: &Figure| match (f.value, &f.refused) {
        (Some(v), _) => latency_text(v, unit),
        (None, Some(why)) if f.name.ends_with("_p99") => why.clone(),
        (None, Some(_)) => "refused".to_owned(),
        (None, None) => "n/a".to_owned(),
    };
    let p99 = row[2];
    let tail = match (p99.value, p99.interval) {
        (Some(v), Some((lo, hi))) => format!(
            "{} (95 % CI {}-{}{})",
            latency_text(v, unit),
            latency_text(lo, unit),
            latency_text(hi, unit),
            p99.n_per_effective
                .map(|r| format!("; n/n_eff {r:.2}"))
                .unwrap_or_default()
        ),
        // Pooled inter-token gaps keep no order statistics, so no interval (§7).
        (Some(v), None) if p99.refused.is_none() => match &note {
            Some(note) => format!(
                "{} (pooled gaps, no interval; {note})",
                latency_text(v, unit)
            ),
            None => format!("{} (pooled gaps, no interval)", latency_text(v, unit)),
        },
        _ => cell(p99),
    };
    let _ = writeln!(
        out,
        "  {label:<12} {n:>6}  {:>11}  {:>11}  {tail}",
        cell(row[0]),
        cell(row[1])
    );
    for f in &row[..2] {
        if let (None, Some(why)) = (f.value, &f.refused) {
            let _ = writeln!(out, "  {:<12}         {}: {why}", "", f.name);
        }
    }
}

/// The summary of `report` with the configuration's thresholds and then the user's
/// (`--fail-on`), written as `summary.json` into `output`.
pub fn write(
    report: &Report,
    (configured, asked): (&[Threshold], &[Threshold]),
    output: &std::path::Path,
) -> std::io::Result<Summary> {
    let thresholds: Vec<Threshold> = configured.iter().chain(asked).cloned().collect();
    let summary = of(report, &thresholds);
    std::fs::write(output.join("summary.json"), json(&summary))?;
    Ok(summary)
}

/// `summary.json`: the summary, pretty-printed, with a final newline.
pub fn json(summary: &Summary) -> String {
    let mut text = serde_json::to_string_pretty(summary).unwrap_or_else(|e| {
        // Every field is a plain number, string or list: serialization cannot fail.
        format!("{{\"schema\":\"{SCHEMA}\",\"error\":\"{e}\"}}")
    });
    text.push('\n');
    text
}

/// v0.5: the server side in one line per scraped source (SPEC §2 "Server-side evidence",
/// issue 55 item 4): how many scrapes it answered, and over the main window (the baseline, else
/// the measurement) its clock's first-token and end-to-end means against the client's with each
/// verdict, and its finished count against the client's; or why there is no evidence.
fn server_lines(report: &Report) -> Vec<String> {
    use percentes_formats::spec::FirstTokenPath;
    let Some(server) = report.server.as_ref() else {
        return Vec::new();
    };
    if report.rules.path != FirstTokenPath::Decomposed {
        return Vec::new();
    }
    server.summary_lines()
}

/// A4 (v0.5): the summary's line on the first token's path (SPEC §2): the baseline's (else the
/// first measured window's), with each source's split at its clock where scraped; `None` where
/// no window was decomposed.
fn path_line(report: &Report) -> Option<String> {
    let measured = || report.windows.iter().filter(|w| w.window != "warm-up");
    let (window, path) = measured()
        .filter_map(|w| Some((w.window, w.first_token_path.as_ref()?)))
        .find(|(w, _)| *w == "baseline")
        .or_else(|| measured().find_map(|w| Some((w.window, w.first_token_path.as_ref()?))))?;
    let (Some(written), Some(head), Some(first)) =
        (&path.to_written, &path.to_head, &path.head_to_first)
    else {
        return Some(format!(
            "first token's path, {window} (§2): no completed, streamed request to decompose"
        ));
    };
    let median = path
        .first_delivery
        .percentiles
        .iter()
        .find(|(n, _)| n == "p50")
        .map_or("n/a".into(), |(_, v)| v.to_string());
    let mut signatures: Vec<&str> = path.signatures.iter().map(|s| s.name).collect();
    let mut servers = Vec::new();
    let split = report.server.iter().flat_map(|s| &s.windows);
    for (source, p) in
        split.filter_map(|w| Some((&w.source, w.path.as_ref()?)).filter(|_| w.window == window))
    {
        servers.push(format!(
            "; {source}'s clock holds {:.3} of the client's {:.3} ms{}",
            p.inside_server_ms,
            p.client_ms,
            p.after_server_at_least_ms
                .map(|a| format!(", at least {a:.3} ms after its first token"))
                .unwrap_or_default()
        ));
        if let Some(s) = p
            .signature
            .as_ref()
            .filter(|s| !signatures.contains(&s.name))
        {
            signatures.push(s.name);
        }
    }
    Some(format!(
        "first token's path, {window} (§2, means): {:.3} ms intended to written, {:.3} ms to the response head, {:.3} ms head to first token; head with the first token in {}, first delivery {median} deltas (p50){}: {}",
        written.mean_ms,
        head.mean_ms,
        first.mean_ms,
        crate::words::percent_of(path.head_with_first, path.n),
        servers.concat(),
        if signatures.is_empty() {
            "no signature".to_owned()
        } else {
            signatures.join(", ")
        }
    ))
}
