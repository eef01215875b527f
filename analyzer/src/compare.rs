//! `percentes compare A B` (issue 37 item 5): two runs, or two groups of runs, side by side per
//! window, each figure with its difference, an interval, a named test and a verdict (SPEC §9
//! "Comparisons").
//!
//! One run a side is compared request by request ([`crate::estimate::compare`]): a latency
//! quantile by Mood's quantile test with a simultaneous interval from the two order-statistic
//! intervals, a share by Fisher's exact test with Newcombe's interval. Two or more runs a side
//! are compared run by run: each run's published figure, Welch's test and interval. Every
//! p-value is adjusted by Holm over all the tests of the comparison (§7: several endpoints).
//!
//! A verdict is one of: `differs` (Holm-adjusted p below 0.05 and a difference larger than the
//! margin), `equal within the margin` (the whole interval inside it), `no decision` (neither,
//! with why), `refused` (no figure or no test, with why). The margins say what difference
//! matters: 5 % of A's value for a latency or a throughput, one percentage point for a share, by
//! default. Each figure's change says it in the reader's terms (B slower, faster, worse, better,
//! no difference), and the comparison's verdict sums them up (issue 54 item 2): a regression
//! (B worse than A beyond the margin somewhere), an improvement, no difference, or not
//! comparable; `compare --fail-on-regression` exits 3 on a regression.
//!
//! Under v0.5 (A4) the request-by-request tests read each side's samples at their effective
//! number (SPEC §7; [`crate::estimate::compare`] says how), from its series in intended-time
//! order.
//!
//! Throughput (requests and output tokens per second) is compared run by run, by Welch; one run
//! a side has no test of it here, and its row says so. `--diagnose` compares invalid runs'
//! figures too, each marked as a diagnosis.

use std::fmt::Write as _;

use serde::Serialize;

use crate::analysis::{latency_samples, LatencySamples};
use percentes_formats::spec::{GoodputReading, TailSample};

use crate::estimate::compare as stats;
use crate::estimate::effective::exceedances;
use crate::estimate::runs::holm_adjusted;
use crate::figures;
use crate::load::Run;
use crate::model::{DeclaredGoodput, Report, WindowReport};

/// The schema of `compare --json`: /2 added each figure's `change`, the comparison's
/// `verdict` with its `regressions` and `improvements`, the throughput figures and `diagnosis`.
pub const SCHEMA: &str = "percentes-compare/2";
/// The significance level after Holm's adjustment.
pub const ALPHA: f64 = 0.05;

/// What difference matters.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Margins {
    /// For a latency or a throughput: this fraction of A's value (0.05: 5 %).
    pub latency_relative: f64,
    /// For a share: this many units of share (0.01: one percentage point).
    pub share_absolute: f64,
}

impl Default for Margins {
    fn default() -> Margins {
        Margins {
            latency_relative: 0.05,
            share_absolute: 0.01,
        }
    }
}

/// One analyzed run on a side.
#[derive(Debug)]
pub struct Side<'a> {
    /// How the comparison names it (its file name).
    pub name: String,
    /// The loaded run (its requests, for the request-level tests).
    pub run: &'a Run,
    /// Its analysis.
    pub report: &'a Report,
}

/// The comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Side A's runs.
    pub a: Vec<String>,
    /// Side B's runs.
    pub b: Vec<String>,
    /// `request-level` (one run a side) or `run-level` (two or more a side).
    pub level: &'static str,
    /// The margins applied.
    pub margins: Margins,
    /// Whether invalid runs' figures were compared for diagnosis (`--diagnose`): nothing of
    /// such a comparison may be published.
    pub diagnosis: bool,
    /// B against A in one word: `regression` (worse beyond the margin in some figure),
    /// `improvement` (better in some, worse in none), `no difference` (none differs), `not
    /// comparable` (no figure could be compared: an invalid side, no common window).
    pub verdict: &'static str,
    /// The figures where B is worse than A beyond the margin, `window figure`.
    pub regressions: Vec<String>,
    /// The figures where B is better than A beyond the margin.
    pub improvements: Vec<String>,
    /// Tests counted in Holm's adjustment.
    pub tests: usize,
    /// What the reader must know first: invalid runs, differing designs.
    pub notes: Vec<String>,
    /// Each window both sides have, in A's order.
    pub windows: Vec<WindowComparison>,
}

impl Comparison {
    /// `percentes compare`'s exit (SPEC §10): 2 where a run is gate-invalid (`all_valid`
    /// false), 3 for a regression under `--fail-on-regression`, else 0.
    pub fn exit_code(&self, all_valid: bool, fail_on_regression: bool) -> u8 {
        match (all_valid, self.verdict) {
            (false, _) => 2,
            (true, "regression") if fail_on_regression => 3,
            (true, _) => 0,
        }
    }
}

/// One window of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct WindowComparison {
    /// Its name.
    pub window: String,
    /// Requests scheduled in it, per run of A.
    pub a_scheduled: Vec<u64>,
    /// Per run of B.
    pub b_scheduled: Vec<u64>,
    /// The figures.
    pub figures: Vec<FigureComparison>,
}

/// One figure compared.
#[derive(Clone, Debug, Serialize)]
pub struct FigureComparison {
    /// The figure's name, as a threshold names it (`ttft_p99`, `error_rate`).
    pub name: String,
    /// `s` or `share`.
    pub unit: &'static str,
    /// A's value (the mean over A's runs at run level).
    pub a: Option<f64>,
    /// B's value.
    pub b: Option<f64>,
    /// B - A.
    pub difference: Option<f64>,
    /// The 95 % interval of B - A.
    pub interval: Option<(f64, f64)>,
    /// The test, named.
    pub test: &'static str,
    /// Its two-sided p-value.
    pub p: Option<f64>,
    /// Holm-adjusted over every test of the comparison.
    pub p_holm: Option<f64>,
    /// `differs`, `equal within the margin`, `no decision` or `refused`.
    pub verdict: &'static str,
    /// The verdict in the reader's terms: `B slower` or `B faster` (a latency), `B worse` or
    /// `B better` (a share or a throughput, by which way is better), `no difference`, `no
    /// decision`, `not comparable`.
    pub change: &'static str,
    /// Why, in words.
    pub reason: String,
}

const LATENCIES: [&str; 3] = ["ttft", "tpot", "e2e"];
const QUANTILES: [(&str, f64); 3] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)];
const SHARES: [&str; 3] = ["error_rate", "censored_rate", "goodput"];
const RATES: [&str; 2] = ["requests_per_s", "output_tokens_per_s"];
const MOOD: &str =
    "Mood's quantile test (Fisher's exact); interval from two 97.5 % order-statistic intervals";
const FISHER: &str = "Fisher's exact test; Newcombe's hybrid score interval";
/// A4 (v0.5): the same tests on what the correlated samples are worth (SPEC §7).
const MOOD_A4: &str = "Mood's quantile test (Fisher's exact) on counts divided by each side's design effect (Rao and Scott); interval from two 97.5 % order-statistic intervals at each side's effective n";
const FISHER_A4: &str = "Fisher's exact test and Newcombe's hybrid score interval on counts divided by each side's design effect (Rao and Scott)";
const WELCH: &str = "Welch's t-test over runs; Welch's interval";

fn figure(name: String, unit: &'static str, test: &'static str) -> FigureComparison {
    FigureComparison {
        name,
        unit,
        a: None,
        b: None,
        difference: None,
        interval: None,
        test,
        p: None,
        p_holm: None,
        verdict: "refused",
        change: "not comparable",
        reason: String::new(),
    }
}

/// Whether a larger value of the figure `name` is better (goodput, throughput) or worse (a
/// latency, an error or censored share).
fn higher_is_better(name: &str) -> bool {
    name == "goodput" || RATES.contains(&name)
}

/// Compares side `b` against side `a` (each one run or several); with `diagnose`, an invalid
/// run's figures too (its report analyzed with `--diagnose`), marked as a diagnosis.
pub fn compare(a: &[Side<'_>], b: &[Side<'_>], margins: Margins, diagnose: bool) -> Comparison {
    let level = if a.len() == 1 && b.len() == 1 {
        "request-level"
    } else {
        "run-level"
    };
    let (notes, diagnosis) = notes(a, b, diagnose);
    let mut windows = Vec::new();
    let names: Vec<&str> = a[0].report.windows.iter().map(|w| w.window).collect();
    for name in names.into_iter().filter(|n| *n != "warm-up") {
        fn pick<'r>(side: &[Side<'r>], name: &str) -> Option<Vec<&'r WindowReport>> {
            side.iter()
                .map(|s| s.report.windows.iter().find(|w| w.window == name))
                .collect()
        }
        let (Some(wa), Some(wb)) = (pick(a, name), pick(b, name)) else {
            continue;
        };
        if wa.iter().chain(&wb).all(|w| w.scheduled == 0) {
            continue; // an empty window (a cooldown stated as 0 s): nothing to compare
        }
        let figures = if level == "request-level" {
            request_level(&a[0], &b[0], (wa[0], wb[0]), diagnose)
        } else {
            run_level(a, b, name, diagnose)
        };
        windows.push(WindowComparison {
            window: name.to_owned(),
            a_scheduled: wa.iter().map(|w| w.scheduled).collect(),
            b_scheduled: wb.iter().map(|w| w.scheduled).collect(),
            figures,
        });
    }
    let tests = decide(&mut windows, margins);
    let (verdict, regressions, improvements) = summed(&windows);
    Comparison {
        schema: SCHEMA,
        a: a.iter().map(|s| s.name.clone()).collect(),
        b: b.iter().map(|s| s.name.clone()).collect(),
        level,
        margins,
        diagnosis,
        verdict,
        regressions,
        improvements,
        tests,
        notes,
        windows,
    }
}

/// What the reader must know first: each invalid run (compared for diagnosis or not compared),
/// and runs of different designs; with whether an invalid run was compared (a diagnosis).
fn notes(a: &[Side<'_>], b: &[Side<'_>], diagnose: bool) -> (Vec<String>, bool) {
    let mut notes = Vec::new();
    let mut diagnosis = false;
    for side in a.iter().chain(b) {
        if !side.report.validity.valid {
            let failed = figures::of(side.report, &[]).failed_gates.join(", ");
            diagnosis |= diagnose;
            notes.push(if diagnose {
                format!("{} is invalid ({failed}): its figures are compared for diagnosis only; NOT PUBLISHABLE", side.name)
            } else {
                format!("{} is invalid ({failed}): it publishes no figure, so none of its figures is compared (--diagnose compares them, NOT PUBLISHABLE)", side.name)
            });
        }
    }
    // By design, not by bytes: runs on testbeds that chose their own ports are one design.
    let designs: std::collections::BTreeSet<Option<String>> = a
        .iter()
        .chain(b)
        .map(|s| percentes_formats::config::design_hash(s.run.config.raw_bytes()))
        .collect();
    if designs.len() > 1 {
        notes.push("the runs were recorded with different designs (rate, routes, fault or another key beyond addresses differ): a difference may be the design's".to_owned());
    }
    (notes, diagnosis)
}

/// The comparison's verdict from its figures' changes, with the figures B is worse in and
/// those it is better in (`window figure`).
fn summed(windows: &[WindowComparison]) -> (&'static str, Vec<String>, Vec<String>) {
    let named = |changes: [&str; 2]| -> Vec<String> {
        windows
            .iter()
            .flat_map(|w| {
                w.figures
                    .iter()
                    .filter(move |f| changes.contains(&f.change))
                    .map(move |f| format!("{} {}", w.window, f.name))
            })
            .collect()
    };
    let regressions = named(["B slower", "B worse"]);
    let improvements = named(["B faster", "B better"]);
    let compared = windows
        .iter()
        .flat_map(|w| &w.figures)
        .any(|f| f.change != "not comparable");
    let verdict = match (compared, regressions.is_empty(), improvements.is_empty()) {
        (false, _, _) => "not comparable",
        (true, false, _) => "regression",
        (true, true, false) => "improvement",
        (true, true, true) => "no difference",
    };
    (verdict, regressions, improvements)
}

/// Loads and verifies each journal (or merged run's manifest) of both sides as `analyze` does,
/// analyzes each under `spec` (with `analyzer.diagnose`, an invalid run's figures too, compared
/// as a diagnosis), and compares B against A; with whether every run was valid.
pub fn journals(
    (a, b): (&[std::path::PathBuf], &[std::path::PathBuf]),
    spec: percentes_formats::spec::Spec,
    margins: Margins,
    options: &crate::load::Options,
    analyzer: &crate::model::Analyzer,
) -> Result<(Comparison, bool), crate::shards::ShardError> {
    let mut loaded = Vec::new();
    for path in a.iter().chain(b) {
        let (files, run) = crate::shards::open_with(path, options)?;
        let report = crate::analysis::analyze(&run, &files, spec, analyzer);
        loaded.push((path.display().to_string(), run, report));
    }
    let sides: Vec<Side<'_>> = loaded
        .iter()
        .map(|(name, run, report)| Side {
            name: name.clone(),
            run,
            report,
        })
        .collect();
    let (sa, sb) = sides.split_at(a.len());
    let valid = loaded.iter().all(|(_, _, r)| r.validity.valid);
    Ok((compare(sa, sb, margins, analyzer.diagnose), valid))
}

/// `statistics.tail_lag_max` (§7, A4).
const LAG_MAX: usize = percentes_formats::pins::value::STATISTICS_TAIL_LAG_MAX as usize;

/// What a series in intended-time order is worth around `threshold`: the effective n of its
/// exceedances (§7, A4); `None` where they are correlated past the longest lag.
fn worth_above(in_order: &[u64], threshold: u64) -> Option<f64> {
    let above: Vec<usize> = (0..in_order.len())
        .filter(|&i| in_order[i] > threshold)
        .collect();
    exceedances(in_order.len(), &above, LAG_MAX).n_eff
}

fn samples_of(side: &Side<'_>, window: &str) -> Option<LatencySamples> {
    let bounds = side
        .report
        .timeline
        .windows
        .iter()
        .find(|w| w.window == window)?;
    Some(latency_samples(
        side.run,
        (bounds.start_ns, bounds.end_ns),
        side.report.rules.streams,
    ))
}

/// One run a side: the request-level tests of one window (throughput shown, not tested).
fn request_level(
    a: &Side<'_>,
    b: &Side<'_>,
    (wa, wb): (&WindowReport, &WindowReport),
    diagnose: bool,
) -> Vec<FigureComparison> {
    let mut out = Vec::new();
    let valid = diagnose || a.report.validity.valid && b.report.validity.valid;
    let (sa, sb) = match (samples_of(a, wa.window), samples_of(b, wb.window)) {
        (Some(sa), Some(sb)) if valid => (sa, sb),
        _ => Default::default(),
    };
    // A4 (v0.5): both sides are analyzed under one version; its rule says what a sample is worth.
    let correlated = a.report.rules.tails == TailSample::Effective;
    for (i, latency) in LATENCIES.iter().enumerate() {
        let (xa, xb) = match *latency {
            "ttft" => (&sa.ttft_us, &sb.ttft_us),
            "tpot" => (&sa.tpot_us, &sb.tpot_us),
            _ => (&sa.e2e_us, &sb.e2e_us),
        };
        let ordered = (&sa.in_order[i][..], &sb.in_order[i][..]);
        for (qname, q) in QUANTILES {
            let mut f = quantile_figure((xa, xb), ordered, q, correlated);
            f.name = format!("{latency}_{qname}");
            if !valid {
                f.reason = "an invalid run publishes no figure".into();
            } else if f.p.is_none() && f.reason.is_empty() {
                f.reason = "a side has no completed request with this figure".into();
            }
            out.push(f);
        }
    }
    // A4: the pinned SLO's goodput beside the declared one's (§4 "A declared SLO").
    let pinned =
        (a.report.rules.goodput == GoodputReading::PinnedAndDeclared).then_some("pinned_goodput");
    for name in SHARES.into_iter().chain(pinned) {
        out.push(if valid {
            share_figure(name, (wa, wb), (&sa, &sb), correlated)
        } else {
            let mut f = figure(name.to_owned(), "share", FISHER);
            f.reason = "an invalid run publishes no figure".into();
            f
        });
    }
    out.extend(
        RATES
            .iter()
            .map(|name| rate_shown(name, (a, b), (wa, wb), valid)),
    );
    out
}

/// Why a correlated side has no test (A4).
fn too_correlated(what: &str) -> String {
    format!("a side's {what} are still correlated {LAG_MAX} requests apart (statistics.tail_lag_max): no effective n, so no test (§7)")
}

/// The q-quantile of two sorted samples compared (values, difference, interval, Mood's test),
/// under A4 at each side's effective n from its samples in intended-time order.
fn quantile_figure(
    (xa, xb): (&[u64], &[u64]),
    (oa, ob): (&[u64], &[u64]),
    q: f64,
    correlated: bool,
) -> FigureComparison {
    let mut f = figure(String::new(), "s", if correlated { MOOD_A4 } else { MOOD });
    let seconds = |us: u64| us as f64 / 1e6;
    f.a = stats::nearest_rank(xa, q).map(seconds);
    f.b = stats::nearest_rank(xb, q).map(seconds);
    f.difference = f.a.zip(f.b).map(|(a, b)| b - a);
    let m = stats::pooled_quantile(xa, xb, q);
    let (mut worth, mut split) = (
        (xa.len() as f64, xb.len() as f64),
        (xa.len() as f64, xb.len() as f64),
    );
    if correlated && m.is_some() {
        // Each side's own quantile sizes its interval; Mood's split sizes its table.
        let own = |o: &[u64], x: &[u64]| stats::nearest_rank(x, q).and_then(|v| worth_above(o, v));
        let at_m = |o: &[u64]| m.and_then(|m| worth_above(o, m));
        match (own(oa, xa), own(ob, xb), at_m(oa), at_m(ob)) {
            (Some(wa), Some(wb), Some(ma), Some(mb)) => (worth, split) = ((wa, wb), (ma, mb)),
            _ => {
                f.reason = too_correlated("samples");
                return f;
            }
        }
        // A4 (issue 54 item 1): a tail §7 refuses in the report is refused here too, with the
        // report's reason, whatever its point would have shown.
        let need = crate::estimate::tails::smallest_n(q) as f64;
        if q >= 0.95 && (worth.0 < need || worth.1 < need) {
            f.a = None;
            f.b = None;
            f.difference = None;
            f.reason = format!(
                "{} on a side: A's {} completed are worth {:.0}, B's {} worth {:.0}, and the interval needs {need:.0} a side",
                crate::estimate::tails::omitted_line(&crate::estimate::quantile::name(q)),
                xa.len(),
                worth.0,
                xb.len(),
                worth.1
            );
            return f;
        }
    }
    f.interval =
        stats::quantile_difference_at(xa, xb, q, worth).map(|(lo, hi)| (lo / 1e6, hi / 1e6));
    f.p = m
        .and_then(|m| stats::quantile_test_at(xa, xb, m, split))
        .map(|t| t.p);
    f
}

/// A share of two windows compared (Fisher's test, Newcombe's interval), under A4 on counts
/// divided by each side's design effect from its outcomes in intended-time order.
fn share_figure(
    name: &str,
    (wa, wb): (&WindowReport, &WindowReport),
    (sa, sb): (&LatencySamples, &LatencySamples),
    correlated: bool,
) -> FigureComparison {
    let mut f = figure(
        name.to_owned(),
        "share",
        if correlated { FISHER_A4 } else { FISHER },
    );
    // A4: `goodput` is the declared SLO's where both runs declare the same one (§4 "A
    // declared SLO"); its count and design effect are the report's own.
    if let Some(why) = declared_apart(name, wa, wb) {
        f.reason = why;
        return f;
    }
    let count = |w: &WindowReport| match name {
        "error_rate" => w.outcomes.errored,
        "censored_rate" => w.outcomes.censored,
        // goodput's value is a count over scheduled: its count back, exactly.
        _ => declared(w, name)
            .map_or(w.goodput.value, |d| d.goodput.value)
            .map_or(0, |g| (g * w.scheduled as f64).round() as u64),
    };
    let (ka, na, kb, nb) = (count(wa), wa.scheduled, count(wb), wb.scheduled);
    if na == 0 || nb == 0 {
        f.reason = "a side scheduled nothing in this window".into();
        return f;
    }
    f.a = Some(ka as f64 / na as f64);
    f.b = Some(kb as f64 / nb as f64);
    f.difference = f.a.zip(f.b).map(|(a, b)| b - a);
    // A4: each side's count read at its design effect, from its series in intended order.
    let design = |s: &LatencySamples, w: &WindowReport| -> Option<f64> {
        if let Some(d) = declared(w, name) {
            return d.interval.n_per_effective.map(|r| 1.0 / r);
        }
        let positions = match name {
            "error_rate" => &s.errored,
            "censored_rate" => &s.censored,
            _ => &s.met,
        };
        let worth = exceedances(s.scheduled, positions, LAG_MAX).n_eff?;
        Some(worth / s.scheduled.max(1) as f64)
    };
    let scaled = if correlated {
        design(sa, wa).zip(design(sb, wb)).map(|(da, db)| {
            let (ka, na) = stats::effective_count(ka, na, na as f64 * da);
            let (kb, nb) = stats::effective_count(kb, nb, nb as f64 * db);
            (ka, na, kb, nb)
        })
    } else {
        Some((ka, na, kb, nb))
    };
    match scaled {
        Some((ka, na, kb, nb)) => {
            f.interval = stats::share_difference(ka, na, kb, nb);
            f.p = Some(stats::fisher_exact(ka, na - ka, kb, nb - kb));
        }
        None => f.reason = too_correlated("outcomes"),
    }
    f
}

/// A window's declared goodput where the figure is `goodput` (A4, §4 "A declared SLO").
fn declared<'w>(w: &'w WindowReport, name: &str) -> Option<&'w DeclaredGoodput> {
    w.declared_goodput.as_ref().filter(|_| name == "goodput")
}

/// Why two windows' `goodput` cannot be compared: they declare different SLOs, or one does.
fn declared_apart(name: &str, wa: &WindowReport, wb: &WindowReport) -> Option<String> {
    match (declared(wa, name), declared(wb, name)) {
        (Some(da), Some(db)) if da.slo != db.slo => Some(format!(
            "the runs declare different SLOs (A: {}; B: {}), so their goodputs measure different things: compare pinned_goodput",
            da.slo, db.slo
        )),
        (Some(_), None) | (None, Some(_)) => Some(
            "one run declares an SLO and the other does not: compare pinned_goodput".into(),
        ),
        _ => None,
    }
}

/// A throughput of one run a side: both values and their difference, and why no test.
fn rate_shown(
    name: &str,
    (a, b): (&Side<'_>, &Side<'_>),
    (wa, wb): (&WindowReport, &WindowReport),
    valid: bool,
) -> FigureComparison {
    let mut f = figure(name.to_owned(), "per_s", "none at one run a side");
    if valid {
        f.a = window_figure(a.report, wa.window, name);
        f.b = window_figure(b.report, wb.window, name);
        f.difference = f.a.zip(f.b).map(|(a, b)| b - a);
        f.reason = "a rate of one run a side has no test here: compare several runs a side (A1 A2 --vs B1 B2), each run's rate by Welch".into();
    } else {
        f.reason = "an invalid run publishes no figure".into();
    }
    f
}

/// The value of the figure `name` in `window` as the run's figures give it.
fn window_figure(report: &Report, window: &str, name: &str) -> Option<f64> {
    let summary = figures::of(report, &[]);
    let w = summary.windows.into_iter().find(|w| w.window == window)?;
    w.figures.into_iter().find(|f| f.name == name)?.value
}

/// Two or more runs a side: each run's published figure, by Welch.
fn run_level(
    a: &[Side<'_>],
    b: &[Side<'_>],
    window: &str,
    diagnose: bool,
) -> Vec<FigureComparison> {
    let values = |side: &[Side<'_>], name: &str| -> Vec<f64> {
        side.iter()
            .filter(|s| diagnose || s.report.validity.valid)
            .filter_map(|s| {
                let summary = figures::of(s.report, &[]);
                let w = summary.windows.into_iter().find(|w| w.window == window)?;
                w.figures.into_iter().find(|f| f.name == name)?.value
            })
            .collect()
    };
    let mut names: Vec<(String, &'static str)> = Vec::new();
    for latency in LATENCIES {
        for (qname, _) in QUANTILES {
            names.push((format!("{latency}_{qname}"), "s"));
        }
    }
    names.extend(SHARES.iter().map(|n| ((*n).to_owned(), "share")));
    if a.iter()
        .any(|s| s.report.rules.goodput == GoodputReading::PinnedAndDeclared)
    {
        names.push(("pinned_goodput".to_owned(), "share"));
    }
    names.extend(RATES.iter().map(|n| ((*n).to_owned(), "per_s")));
    names
        .into_iter()
        .map(|(name, unit)| {
            let (va, vb) = (values(a, &name), values(b, &name));
            let mut f = figure(name, unit, WELCH);
            let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
            f.a = mean(&va);
            f.b = mean(&vb);
            f.difference = f.a.zip(f.b).map(|(a, b)| b - a);
            match stats::welch_difference(&va, &vb) {
                Some(w) => {
                    f.interval = Some(w.interval);
                    f.p = Some(w.p);
                }
                None => {
                    f.reason = format!("Welch needs two published values a side with some spread (A has {}, B has {})", va.len(), vb.len());
                }
            }
            f
        })
        .collect()
}

/// Holm over every p-value, then each verdict; the number of tests.
fn decide(windows: &mut [WindowComparison], margins: Margins) -> usize {
    let p: Vec<f64> = windows
        .iter()
        .flat_map(|w| w.figures.iter().filter_map(|f| f.p))
        .collect();
    let adjusted = holm_adjusted(&p);
    let mut next = adjusted.iter();
    for f in windows.iter_mut().flat_map(|w| w.figures.iter_mut()) {
        if f.p.is_some() {
            f.p_holm = next.next().copied();
        }
        verdict(f, margins);
    }
    p.len()
}

fn verdict(f: &mut FigureComparison, margins: Margins) {
    let (Some(p), Some(a), Some(difference)) = (f.p_holm, f.a, f.difference) else {
        f.verdict = "refused";
        f.change = "not comparable";
        return;
    };
    let margin = match f.unit {
        "share" => margins.share_absolute,
        _ => margins.latency_relative * a.abs(),
    };
    let within = f
        .interval
        .is_some_and(|(lo, hi)| lo >= -margin && hi <= margin);
    if p < ALPHA && difference.abs() > margin {
        f.verdict = "differs";
        f.change = match (f.unit, (difference > 0.0) == higher_is_better(&f.name)) {
            ("s", true) => "B faster",
            ("s", false) => "B slower",
            (_, true) => "B better",
            (_, false) => "B worse",
        };
        f.reason = format!(
            "{} after Holm, and the difference is beyond the margin of {}",
            p_text(p),
            value_text(margin, f.unit)
        );
    } else if within {
        f.verdict = "equal within the margin";
        f.change = "no difference";
        f.reason = format!(
            "the whole interval lies within ±{}",
            value_text(margin, f.unit)
        );
    } else {
        f.verdict = "no decision";
        f.change = "no decision";
        f.reason = match f.interval {
            None => format!(
                "{} after Holm; no interval (the samples{} are too small for one), so equality cannot be shown",
                p_text(p),
                // A4: what a side is worth is its effective n, which correlation shrinks.
                if [MOOD_A4, FISHER_A4].contains(&f.test) { ", at their effective number (§7)," } else { "" }
            ),
            Some(_) if p < ALPHA => format!("significant ({}), but the difference is within the margin of {} while its interval is not", p_text(p), value_text(margin, f.unit)),
            Some(_) => format!("{} after Holm, and the interval reaches beyond ±{}", p_text(p), value_text(margin, f.unit)),
        };
    }
}

fn p_text(p: f64) -> String {
    if p < 1e-4 {
        "p < 0.0001".to_owned()
    } else {
        format!("p = {p:.4}")
    }
}

fn value_text(v: f64, unit: &str) -> String {
    match unit {
        "share" => format!("{:.2} pp", v * 100.0),
        "per_s" => format!("{v:.2}/s"),
        _ if v.abs() >= 1.0 => format!("{v:.3} s"),
        _ if v.abs() >= 1e-3 => format!("{:.2} ms", v * 1e3),
        _ => format!("{:.0} µs", v * 1e6),
    }
}

fn signed_text(v: f64, unit: &str) -> String {
    let text = value_text(v.abs(), unit);
    if v < 0.0 {
        format!("-{text}")
    } else {
        format!("+{text}")
    }
}

/// The comparison as a terminal shows it.
pub fn text(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A: {}\nB: {}\n{} comparison; margins: latency ±{:.0} % of A, share ±{:.1} pp; {} tests, Holm-adjusted at {ALPHA}",
        c.a.join(", "),
        c.b.join(", "),
        c.level,
        c.margins.latency_relative * 100.0,
        c.margins.share_absolute * 100.0,
        c.tests
    );
    for note in &c.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(out, "verdict: {}", verdict_words(c));
    for w in &c.windows {
        let _ = writeln!(
            out,
            "{} (scheduled: A {:?}, B {:?})",
            w.window, w.a_scheduled, w.b_scheduled
        );
        for f in &w.figures {
            // A share's value is a percentage; its differences are percentage points.
            let value = |v: Option<f64>| match (v, f.unit) {
                (None, _) => "n/a".to_owned(),
                (Some(v), "share") => format!("{:.2} %", v * 100.0),
                (Some(v), unit) => value_text(v, unit),
            };
            let difference = f
                .difference
                .map_or_else(|| "n/a".to_owned(), |d| signed_text(d, f.unit));
            let interval = f.interval.map_or_else(
                || "no interval".to_owned(),
                |(lo, hi)| format!("[{}, {}]", signed_text(lo, f.unit), signed_text(hi, f.unit)),
            );
            // The change, and the statistical verdict where it says more (`B slower (differs)`).
            let said = if f.change == f.verdict {
                f.change.to_owned()
            } else {
                format!("{} ({})", f.change, f.verdict)
            };
            let _ = writeln!(
                out,
                "  {:<19} A {:>10}  B {:>10}  B-A {:>11} {:<26} {said}: {}",
                f.name,
                value(f.a),
                value(f.b),
                difference,
                interval,
                f.reason
            );
        }
    }
    let methods: Vec<&str> = {
        let mut m: Vec<&str> = c
            .windows
            .iter()
            .flat_map(|w| w.figures.iter().map(|f| f.test))
            .collect();
        m.sort_unstable();
        m.dedup();
        m
    };
    for m in methods {
        let _ = writeln!(out, "method: {m}");
    }
    out
}

/// The comparison's verdict in one line: what changed, where, and whether it may be published.
fn verdict_words(c: &Comparison) -> String {
    let diagnosis = if c.diagnosis {
        " (a diagnosis of invalid runs: NOT PUBLISHABLE)"
    } else {
        ""
    };
    match c.verdict {
        "regression" => format!(
            "REGRESSION{diagnosis}: B is worse than A beyond the margins in {}: {}{}",
            plural(c.regressions.len(), "figure"),
            c.regressions.join(", "),
            if c.improvements.is_empty() {
                String::new()
            } else {
                format!("; better in {}", c.improvements.join(", "))
            }
        ),
        "improvement" => format!(
            "improvement{diagnosis}: B is better than A beyond the margins in {} ({}), and worse in none",
            plural(c.improvements.len(), "figure"),
            c.improvements.join(", ")
        ),
        "no difference" => format!(
            "no difference{diagnosis}: no figure differs beyond its margin ({} equal within it, {} undecided)",
            count_of(c, "no difference"),
            count_of(c, "no decision")
        ),
        _ => "not comparable: no figure of both sides could be compared (see the notes)".to_owned(),
    }
}

fn count_of(c: &Comparison, change: &str) -> usize {
    c.windows
        .iter()
        .flat_map(|w| &w.figures)
        .filter(|f| f.change == change)
        .count()
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The comparison as JSON, pretty-printed, with a final newline.
pub fn json(c: &Comparison) -> String {
    let mut text = serde_json::to_string_pretty(c).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A figure with A's value, B - A, its interval and its Holm-adjusted p, as `decide` leaves
    /// it for `verdict`.
    fn decided(
        name: &str,
        unit: &'static str,
        a: f64,
        d: f64,
        ci: (f64, f64),
        p: f64,
    ) -> FigureComparison {
        let mut f = figure(name.to_owned(), unit, MOOD);
        (f.a, f.b, f.difference) = (Some(a), Some(a + d), Some(d));
        (f.interval, f.p, f.p_holm) = (Some(ci), Some(p), Some(p));
        verdict(&mut f, Margins::default());
        f
    }

    /// Hand-worked: a latency margin is 5 % of A, a share's one point, a rate's 5 % of A. Which
    /// way is worse: up for a latency, an error or censored share; down for goodput and a rate.
    #[test]
    fn each_change_is_named_by_which_way_is_worse() {
        // (figure, unit, A, B - A, interval, Holm p, the change).
        let cases = [
            // TTFT 100 ms -> 150 ms, p < 0.05, beyond 5 ms: slower; the reverse: faster.
            (
                "ttft_p50",
                "s",
                0.100,
                0.050,
                (0.045, 0.055),
                0.001,
                "B slower",
            ),
            (
                "ttft_p50",
                "s",
                0.150,
                -0.050,
                (-0.055, -0.045),
                0.001,
                "B faster",
            ),
            // 4 ms more on 100 ms: significant, but inside the 5 ms margin, interval too.
            (
                "ttft_p50",
                "s",
                0.100,
                0.004,
                (0.003, 0.0049),
                0.001,
                "no difference",
            ),
            // Errors up 3 points: worse; goodput up 3 points: better; goodput down: worse.
            (
                "error_rate",
                "share",
                0.01,
                0.03,
                (0.02, 0.04),
                0.01,
                "B worse",
            ),
            (
                "goodput",
                "share",
                0.90,
                0.03,
                (0.02, 0.04),
                0.01,
                "B better",
            ),
            (
                "goodput",
                "share",
                0.90,
                -0.03,
                (-0.04, -0.02),
                0.01,
                "B worse",
            ),
            // 10 requests/s to 9: down 10 %, beyond 5 % of 10: worse; tokens/s up: better.
            (
                "requests_per_s",
                "per_s",
                10.0,
                -1.0,
                (-1.5, -0.5),
                0.01,
                "B worse",
            ),
            (
                "output_tokens_per_s",
                "per_s",
                100.0,
                10.0,
                (5.0, 15.0),
                0.01,
                "B better",
            ),
            // Not significant, the interval past the margin: no decision.
            ("e2e_p99", "s", 1.0, 0.2, (-0.1, 0.5), 0.3, "no decision"),
        ];
        for (name, unit, a, d, ci, p, change) in cases {
            let f = decided(name, unit, a, d, ci, p);
            assert_eq!(f.change, change, "{name} {a} {d:+}: {}", f.reason);
        }
        let within = decided("ttft_p50", "s", 0.100, 0.004, (0.003, 0.0049), 0.001);
        assert_eq!(within.verdict, "equal within the margin");
        // No interval: the reason says whether the samples were read at their effective n.
        for (test, said) in [(MOOD, false), (MOOD_A4, true)] {
            let mut f = figure("ttft_p99".into(), "s", test);
            (f.a, f.difference, f.p_holm) = (Some(1.0), Some(0.2), Some(0.3));
            verdict(&mut f, Margins::default());
            assert_eq!(f.change, "no decision");
            assert!(f.reason.contains("too small for one"), "{}", f.reason);
            assert_eq!(
                f.reason.contains("at their effective number"),
                said,
                "{}",
                f.reason
            );
        }
        // No test at all: not comparable.
        let mut none = figure("requests_per_s".into(), "per_s", "none at one run a side");
        verdict(&mut none, Margins::default());
        assert_eq!((none.verdict, none.change), ("refused", "not comparable"));
    }

    #[test]
    fn the_comparison_is_a_regression_where_any_figure_is_worse() {
        let window = |figures: Vec<FigureComparison>| WindowComparison {
            window: "measurement".into(),
            a_scheduled: vec![10],
            b_scheduled: vec![10],
            figures,
        };
        let slower = decided("ttft_p50", "s", 0.1, 0.05, (0.045, 0.055), 0.001);
        let better = decided("goodput", "share", 0.9, 0.03, (0.02, 0.04), 0.01);
        let same = decided("e2e_p50", "s", 1.0, 0.0, (-0.01, 0.01), 0.9);
        let refused = figure("requests_per_s".into(), "per_s", "none");
        let (verdict, worse, improved) =
            summed(&[window(vec![slower, better.clone(), same.clone()])]);
        assert_eq!(verdict, "regression");
        assert_eq!(worse, ["measurement ttft_p50"]);
        assert_eq!(improved, ["measurement goodput"]);
        assert_eq!(
            summed(&[window(vec![better, same.clone()])]).0,
            "improvement"
        );
        assert_eq!(
            summed(&[window(vec![same, refused.clone()])]).0,
            "no difference"
        );
        assert_eq!(summed(&[window(vec![refused])]).0, "not comparable");
        assert_eq!(summed(&[]).0, "not comparable");
    }
}
