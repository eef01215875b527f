//! Campaigns (SPEC §5, §7): the runs of each (variant, configuration), their run-level scalars
//! verbatim, median, mean, the pinned t-interval at N = 5, the range, the run-to-run coefficient of
//! variation as the noise floor, Welch comparisons between two variants with Holm's correction
//! over the secondaries, the sweep-ordering check, G5 across runs, and the headline with its slots
//! filled from measurements only.
//!
//! A run that failed a run-invalidating gate is dropped and named, never imputed; a value a run
//! could not measure (a TTR that did not happen, an equilibrium not estimable) is dropped from that
//! scalar and named the same way. There is no bootstrap (§7).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::Report;
use crate::estimate::runs::{self, RunSummary};

/// One analyzed run of a campaign.
#[derive(Clone, Debug)]
pub struct CampaignRun {
    /// How the campaign names it (the journal's file name).
    pub name: String,
    pub report: Report,
    /// The journal header's `accelerator.*` host facts (G5).
    pub accelerator: Vec<(String, String)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Campaign {
    pub schema: &'static str,
    pub spec_applied: String,
    pub not_publishable: Vec<String>,
    pub groups: Vec<Group>,
    /// Between exactly two variants: one Welch test per secondary scalar, Holm-adjusted.
    pub comparisons: Vec<Comparison>,
    pub comparison_note: String,
    /// Whether the variants' order by median TTR to the pre-fault baseline holds in all 27 cells.
    pub ordering: String,
    pub headline: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Group {
    pub variant: String,
    pub config_hash: String,
    pub runs: Vec<String>,
    /// Runs dropped from every scalar, with why.
    pub dropped: Vec<String>,
    pub g5: String,
    pub scalars: Vec<Scalar>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Scalar {
    pub name: &'static str,
    pub unit: &'static str,
    /// `primary` or `secondary` (§7).
    pub role: &'static str,
    /// Heavy-tailed scalars lead with the median and the range (§7).
    pub heavy_tailed: bool,
    /// (run, value) for every run that measured it, verbatim.
    pub values: Vec<(String, f64)>,
    /// Runs without a value, with why.
    pub dropped: Vec<String>,
    pub summary: Option<Summary>,
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub t_interval: Option<(f64, f64)>,
    pub t_interval_note: Option<String>,
    pub coefficient_of_variation: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub scalar: &'static str,
    pub variants: (String, String),
    pub t: f64,
    pub df: f64,
    pub p: f64,
    pub p_holm: f64,
}

type Extract = fn(&Report) -> Result<f64, String>;

/// The run-level scalars: (name, unit, role, heavy-tailed, extractor).
const SCALARS: &[(&str, &str, &str, bool, Extract)] = &[
    (
        "TTR to the single-replica equilibrium",
        "s",
        "primary",
        true,
        |r| {
            let rec = r.recovery.as_ref().ok_or("no recovery report")?;
            rec.to_equilibrium
                .ttr_s
                .ok_or_else(|| rec.to_equilibrium.text.clone())
        },
    ),
    (
        "TTR to the two-replica pre-fault baseline",
        "s",
        "secondary",
        true,
        |r| {
            let rec = r.recovery.as_ref().ok_or("no recovery report")?;
            rec.to_pre_fault
                .ttr_s
                .ok_or_else(|| rec.to_pre_fault.text.clone())
        },
    ),
    (
        "in flight on the victim at fire: failed",
        "%",
        "secondary",
        false,
        |r| victim_share(r, |o| o.errored),
    ),
    (
        "in flight on the victim at fire: timed out",
        "%",
        "secondary",
        false,
        |r| victim_share(r, |o| o.censored),
    ),
    (
        "baseline TTFT p50 (conditional on completion)",
        "ms",
        "secondary",
        false,
        |r| ttft_p50(r, "baseline"),
    ),
    (
        "fault TTFT p50 (conditional on completion)",
        "ms",
        "secondary",
        false,
        |r| ttft_p50(r, "fault"),
    ),
    (
        "fault window: completion incidence within 1 s",
        "share",
        "secondary",
        false,
        |r| window(r, "fault").map(|w| w.completion.within_1s),
    ),
    (
        "fault window: error rate",
        "share",
        "secondary",
        false,
        |r| {
            window(r, "fault")?
                .error_rate
                .value
                .ok_or_else(|| "nothing scheduled".into())
        },
    ),
    (
        "integrated goodput deficit",
        "goodput-s",
        "secondary",
        false,
        |r| {
            let rec = r.recovery.as_ref().ok_or("no recovery report")?;
            rec.deficit_goodput_s
                .ok_or_else(|| "no baseline goodput".into())
        },
    ),
];

fn window<'a>(r: &'a Report, name: &str) -> Result<&'a crate::analysis::WindowReport, String> {
    r.windows
        .iter()
        .find(|w| w.window == name)
        .ok_or_else(|| format!("no {name} window"))
}

/// The share (%) of the requests in flight on the victim at fire that `count` picks.
fn victim_share(r: &Report, count: fn(&crate::analysis::Outcomes) -> u64) -> Result<f64, String> {
    let f = r
        .in_flight_at_fire
        .as_ref()
        .ok_or("the fault never fired")?;
    let o = &f.on_victim;
    let n = o.completed + o.errored + o.censored;
    (n > 0)
        .then(|| count(o) as f64 / n as f64 * 100.0)
        .ok_or_else(|| "nothing in flight on the victim".into())
}

fn ttft_p50(r: &Report, name: &str) -> Result<f64, String> {
    let w = window(r, name)?;
    w.ttft
        .percentiles_us
        .iter()
        .find(|(q, _)| q == "p50")
        .map(|(_, us)| *us as f64 / 1000.0)
        .ok_or_else(|| format!("no completion in the {name} window"))
}

fn summary(values: &[f64]) -> Option<Summary> {
    let s: RunSummary = runs::summarize(values)?;
    let (t_interval, t_interval_note) = match s.t_interval {
        Ok(i) => (Some(i), None),
        Err(why) => (None, Some(why)),
    };
    Some(Summary {
        n: values.len(),
        median: s.median,
        mean: s.mean,
        min: s.min,
        max: s.max,
        t_interval,
        t_interval_note,
        coefficient_of_variation: s.coefficient_of_variation,
    })
}

fn describe(
    name: &str,
    unit: &str,
    heavy: bool,
    s: &Option<Summary>,
    values: &[(String, f64)],
) -> String {
    let list: Vec<String> = values.iter().map(|(_, v)| format!("{v:.3}")).collect();
    match s {
        None => format!("{name}: no run measured it"),
        Some(s) => {
            let interval = s.t_interval.map_or_else(
                || s.t_interval_note.clone().unwrap_or_default(),
                |(a, b)| format!("t-interval (t = 2.776) [{a:.3}, {b:.3}]"),
            );
            let cv = s
                .coefficient_of_variation
                .map_or("n/a".into(), |c| format!("{c:.3}"));
            if heavy {
                format!(
                    "{name}: median {:.3} {unit} (range {:.3}-{:.3}; mean {:.3}; {interval}; CV {cv}); values {}",
                    s.median, s.min, s.max, s.mean, list.join(", ")
                )
            } else {
                format!(
                    "{name}: mean {:.3} {unit}, {interval}, median {:.3}, range {:.3}-{:.3}, CV {cv}; values {}",
                    s.mean, s.median, s.min, s.max, list.join(", ")
                )
            }
        }
    }
}

/// Builds the campaign from analyzed runs.
pub fn build(runs: &[CampaignRun]) -> Campaign {
    let mut by_config: BTreeMap<(String, String), Vec<&CampaignRun>> = BTreeMap::new();
    for run in runs {
        let key = (
            run.report.provenance.fault_variant.clone(),
            run.report.provenance.config_hash.clone(),
        );
        by_config.entry(key).or_default().push(run);
    }
    let mut not_publishable: Vec<String> = Vec::new();
    for run in runs {
        for why in &run.report.not_publishable {
            let line = format!("{}: {why}", run.name);
            if !not_publishable.contains(&line) {
                not_publishable.push(line);
            }
        }
    }
    let expected = percentes_formats::pins::int("campaign.runs") as usize;
    let mut groups = Vec::new();
    for ((variant, config_hash), members) in &by_config {
        let mut dropped = Vec::new();
        let valid: Vec<&&CampaignRun> = members
            .iter()
            .filter(|r| {
                if r.report.validity.valid {
                    true
                } else {
                    dropped.push(format!(
                        "{}: {}",
                        r.name,
                        r.report
                            .windows_withheld
                            .clone()
                            .unwrap_or_else(|| "invalid".into())
                    ));
                    false
                }
            })
            .collect();
        if members.len() != expected {
            dropped.push(format!(
                "the group has {} runs; §5 asks for {expected} per (variant, configuration)",
                members.len()
            ));
        }
        let g5 = g5(members);
        let scalars = SCALARS
            .iter()
            .map(|&(name, unit, role, heavy, extract)| {
                let mut values = Vec::new();
                let mut missing = Vec::new();
                for r in &valid {
                    match extract(&r.report) {
                        Ok(v) if v.is_finite() => values.push((r.name.clone(), v)),
                        Ok(_) => missing.push(format!("{}: not a finite number", r.name)),
                        Err(why) => missing.push(format!("{}: {why}", r.name)),
                    }
                }
                let numbers: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
                let summary = summary(&numbers);
                let text = describe(name, unit, heavy, &summary, &values);
                Scalar {
                    name,
                    unit,
                    role,
                    heavy_tailed: heavy,
                    values,
                    dropped: missing,
                    summary,
                    text,
                }
            })
            .collect();
        groups.push(Group {
            variant: variant.clone(),
            config_hash: config_hash.clone(),
            runs: members.iter().map(|r| r.name.clone()).collect(),
            dropped,
            g5,
            scalars,
        });
    }

    let (comparisons, comparison_note) = compare(&groups);
    let ordering = ordering(runs);
    let headline = headline(&groups, runs);
    Campaign {
        schema: "percentes-campaign/1",
        spec_applied: runs
            .first()
            .map_or_else(String::new, |r| r.report.provenance.spec_applied.clone()),
        not_publishable,
        groups,
        comparisons,
        comparison_note,
        ordering,
        headline,
    }
}

/// G5: the accelerator fingerprints must be equal across a group's runs (self-hosted only).
fn g5(members: &[&CampaignRun]) -> String {
    let kind = members
        .first()
        .map_or("", |r| r.report.provenance.target_kind.as_str());
    match kind {
        "mock" => "not applicable (the mock has no accelerator)".into(),
        "hosted" => "not evaluable (hosted, §6)".into(),
        _ => {
            if members.iter().any(|r| r.accelerator.is_empty()) {
                "unobserved, which fails the group (§10): a journal carries no accelerator.* host facts".into()
            } else if members
                .windows(2)
                .all(|w| w[0].accelerator == w[1].accelerator)
            {
                "pass: equal accelerator fingerprints in every run".into()
            } else {
                "fail: the accelerator fingerprints differ between runs".into()
            }
        }
    }
}

/// Welch tests between exactly two variants over the secondary scalars, Holm-adjusted.
fn compare(groups: &[Group]) -> (Vec<Comparison>, String) {
    let variants: Vec<&Group> = groups.iter().collect();
    if variants.len() != 2 || variants[0].variant == variants[1].variant {
        return (
            Vec::new(),
            "no comparison: it needs exactly two groups of different variants".into(),
        );
    }
    let (a, b) = (variants[0], variants[1]);
    let mut raw = Vec::new();
    for (sa, sb) in a.scalars.iter().zip(&b.scalars) {
        if sa.role != "secondary" {
            continue;
        }
        let xa: Vec<f64> = sa.values.iter().map(|(_, v)| *v).collect();
        let xb: Vec<f64> = sb.values.iter().map(|(_, v)| *v).collect();
        if let Some((t, df, p)) = runs::welch(&xa, &xb) {
            raw.push((sa.name, t, df, p));
        }
    }
    let adjusted = runs::holm_adjusted(&raw.iter().map(|r| r.3).collect::<Vec<_>>());
    let comparisons = raw
        .into_iter()
        .zip(adjusted)
        .map(|((scalar, t, df, p), p_holm)| Comparison {
            scalar,
            variants: (a.variant.clone(), b.variant.clone()),
            t,
            df,
            p,
            p_holm,
        })
        .collect();
    (
        comparisons,
        format!(
            "Welch two-sample t-tests, {} against {}, Holm-adjusted over the secondaries (§7)",
            a.variant, b.variant
        ),
    )
}

/// The headline's sentence filled from one run (a report's own line; `campaign` fills it over
/// the five runs of each variant).
pub fn single_run_headline(report: &Report) -> String {
    build(&[CampaignRun {
        name: "this run".into(),
        report: report.clone(),
        accelerator: Vec::new(),
    }])
    .headline
}

/// Whether two variants keep one order by median TTR to the pre-fault baseline across the sweep.
fn ordering(runs: &[CampaignRun]) -> String {
    let mut by_variant: BTreeMap<&str, Vec<&crate::recovery::RecoveryReport>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.report.validity.valid) {
        if let Some(rec) = &r.report.recovery {
            by_variant
                .entry(r.report.provenance.fault_variant.as_str())
                .or_default()
                .push(rec);
        }
    }
    if by_variant.len() != 2 {
        return "no ordering claim: it needs two variants".into();
    }
    let names: Vec<&str> = by_variant.keys().copied().collect();
    let median_at = |reports: &[&crate::recovery::RecoveryReport], cell: usize| {
        let values: Vec<f64> = reports
            .iter()
            .filter_map(|r| r.sweep.get(cell).and_then(|c| c.to_pre_fault_s))
            .collect();
        runs::summarize(&values).map(|s| s.median)
    };
    let mut orders = Vec::new();
    for cell in 0..27 {
        let a = median_at(&by_variant[names[0]], cell);
        let b = median_at(&by_variant[names[1]], cell);
        orders.push(a.zip(b).map(|(a, b)| a.total_cmp(&b)));
    }
    if orders.iter().all(|o| o.is_some() && *o == orders[0]) {
        let word = match orders[0] {
            Some(std::cmp::Ordering::Less) => "faster than",
            Some(std::cmp::Ordering::Greater) => "slower than",
            _ => "as fast as",
        };
        format!(
            "stable across all 27 cells: {} recovers to the pre-fault baseline {word} {}",
            names[0], names[1]
        )
    } else {
        "the order of the variants changes across the sweep (or a cell has no recovery): no ordering claim is made (§5)".into()
    }
}

const EMPTY: &str = "[not measured]";

/// The pre-committed headline (SPEC appendix), each slot from a measurement or left empty.
fn headline(groups: &[Group], runs: &[CampaignRun]) -> String {
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
    let (segments, dominant) = segments(runs);
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
        ttr.as_ref().map_or(EMPTY.to_owned(), |s| format!("{:.1} s", s.median)),
        segments,
        dominant,
    )
}

/// The measured decomposition segments of the clean-delete runs: which boundaries every run
/// measured, and the segment (anchor to the first, then between consecutive ones) with the
/// largest median length.
fn segments(runs: &[CampaignRun]) -> (String, String) {
    let reports: Vec<&crate::recovery::RecoveryReport> = runs
        .iter()
        .filter(|r| r.report.validity.valid && r.report.provenance.fault_variant == "clean-delete")
        .filter_map(|r| r.report.recovery.as_ref())
        .collect();
    let Some(first) = reports.first() else {
        return (EMPTY.into(), EMPTY.into());
    };
    let measured: Vec<&str> = first
        .decomposition
        .iter()
        .map(|b| b.boundary)
        .filter(|name| {
            reports.iter().all(|r| {
                r.decomposition
                    .iter()
                    .any(|b| b.boundary == *name && b.since_anchor_s.is_some())
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

/// `campaign.md`.
pub fn markdown(c: &Campaign) -> String {
    use std::fmt::Write as _;
    let mut md = String::new();
    let _ = writeln!(md, "# percentes campaign\n");
    for why in &c.not_publishable {
        let _ = writeln!(
            md,
            "**NOT PUBLISHABLE: {}**\n",
            why.trim_start_matches("NOT PUBLISHABLE: ")
        );
    }
    let _ = writeln!(md, "Spec applied: {}. No bootstrap at N = 5 (§7); dropped runs and values are named, never imputed.\n", c.spec_applied);
    let _ = writeln!(md, "## Headline\n\n> {}\n", c.headline);
    for g in &c.groups {
        let _ = writeln!(
            md,
            "## {} (config {})\n",
            g.variant,
            &g.config_hash[..16.min(g.config_hash.len())]
        );
        let _ = writeln!(md, "Runs: {}. G5: {}.\n", g.runs.join(", "), g.g5);
        for d in &g.dropped {
            let _ = writeln!(md, "- Dropped: {d}");
        }
        let _ = writeln!(
            md,
            "\n| scalar | role | summary | dropped |\n|---|---|---|---|"
        );
        for s in &g.scalars {
            let _ = writeln!(
                md,
                "| {} ({}) | {} | {} | {} |",
                s.name,
                s.unit,
                s.role,
                s.text,
                s.dropped.join("; ")
            );
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "## Comparison\n\n{}.\n", c.comparison_note);
    if !c.comparisons.is_empty() {
        let _ = writeln!(
            md,
            "| scalar | t | df | p | p (Holm) |\n|---|---|---|---|---|"
        );
        for x in &c.comparisons {
            let _ = writeln!(
                md,
                "| {} | {:.3} | {:.2} | {:.4} | {:.4} |",
                x.scalar, x.t, x.df, x.p, x.p_holm
            );
        }
    }
    let _ = writeln!(
        md,
        "\nOrdering across the sensitivity sweep: {}.",
        c.ordering
    );
    md
}
