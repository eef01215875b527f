//! The run-level scalars of a set of analyzed runs, grouped by (variant, configuration), with
//! their summaries (SPEC §5, §7). The campaign report and each run's own headline both read
//! these; neither computes a scalar of its own.

use std::collections::BTreeMap;

use percentes_formats::journal::probe;
use percentes_formats::pins;
use percentes_formats::spec::{CapacityCheck, ReadingWords, ShareSupport, SurvivorSpan};

use crate::estimate::runs::{self, RunSummary};
use crate::model::{ChangeReport, Group, RecoveryReport, Report, Scalar, Summary};

/// One analyzed run, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct RunRef<'a> {
    /// How the campaign names it (the journal's file name).
    pub name: &'a str,
    /// Its analysis.
    pub report: &'a Report,
    /// The journal header's `accelerator.*` host facts (G5).
    pub accelerator: &'a [(String, String)],
    /// Its configuration's design ([`percentes_formats::config::design_hash`]): runs are
    /// grouped by it. A run read alone gives its config hash.
    pub design: &'a str,
    /// The median of its capacity probe, ms (the `capacity-probe` host fact; SPEC §10
    /// "Capacity check"), when its journal holds one.
    pub probe_ms: Option<f64>,
}

type Extract = fn(&Report) -> Result<f64, Unmeasured>;

/// Why a run gives no value for a scalar: the campaign lists the run beside the scalar with
/// this reason, so that a run left out is never silent.
#[derive(Clone, Debug, PartialEq)]
pub enum Unmeasured {
    /// The run has no recovery report (no fault, or the analysis read none).
    NoRecovery,
    /// The report has no window of this name.
    NoWindow(&'static str),
    /// The recovery has no survivor span of this name (A3).
    NoSpan(&'static str),
    /// The window completed nothing, so it has no TTFT quantile.
    NoCompletion(&'static str),
    /// The fault never fired, so nothing was in flight at its fire.
    NeverFired,
    /// Nothing was in flight on the victim at the fire.
    NothingInFlight,
    /// Fewer were in flight on the victim than a share may rest on (§9).
    TooFewInFlight {
        /// In flight.
        n: u64,
        /// `statistics.share_min_requests`.
        min: u64,
    },
    /// The window scheduled nothing, so it has no error rate.
    NothingScheduled,
    /// The recovery has no baseline goodput to measure a deficit against.
    NoBaselineGoodput,
    /// A recovery measured where the scalar reads a bound (A3); the report's words.
    MeasuredNotBound(String),
    /// The report's own sentence for why it has no value (a TTR's or a span's note).
    Reported(String),
}

impl std::fmt::Display for Unmeasured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unmeasured::NoRecovery => f.write_str("no recovery report"),
            Unmeasured::NoWindow(name) => write!(f, "no {name} window"),
            Unmeasured::NoSpan(name) => write!(f, "no {name} span"),
            Unmeasured::NoCompletion(name) => write!(f, "no completion in the {name} window"),
            Unmeasured::NeverFired => f.write_str("the fault never fired"),
            Unmeasured::NothingInFlight => f.write_str("nothing in flight on the victim"),
            Unmeasured::TooFewInFlight { n, min } => write!(
                f,
                "refused: {n} in flight, fewer than the {min} a share may rest on (statistics.share_min_requests, §9)"
            ),
            Unmeasured::NothingScheduled => f.write_str("nothing scheduled"),
            Unmeasured::NoBaselineGoodput => f.write_str("no baseline goodput"),
            Unmeasured::MeasuredNotBound(text) => write!(f, "measured, not a bound: {text}"),
            Unmeasured::Reported(text) => f.write_str(text),
        }
    }
}

/// The run's recovery report.
fn recovery(r: &Report) -> Result<&RecoveryReport, Unmeasured> {
    r.recovery.as_ref().ok_or(Unmeasured::NoRecovery)
}

/// The run-level scalars: (name, unit, role, heavy-tailed, extractor).
const SCALARS: &[(&str, &str, &str, bool, Extract)] = &[
    (
        "TTR to the single-replica equilibrium",
        "s",
        "primary",
        true,
        |r| {
            let rec = recovery(r)?;
            rec.to_equilibrium
                .ttr_s
                .ok_or_else(|| Unmeasured::Reported(rec.to_equilibrium.text.clone()))
        },
    ),
    (
        "TTR to the two-replica pre-fault baseline",
        "s",
        "secondary",
        true,
        |r| {
            let rec = recovery(r)?;
            rec.to_pre_fault
                .ttr_s
                .ok_or_else(|| Unmeasured::Reported(rec.to_pre_fault.text.clone()))
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
                .ok_or(Unmeasured::NothingScheduled)
        },
    ),
    (
        "integrated goodput deficit",
        "goodput-s",
        "secondary",
        false,
        |r| {
            let rec = recovery(r)?;
            rec.deficit_goodput_s.ok_or(Unmeasured::NoBaselineGoodput)
        },
    ),
];

/// The fault scalars A4 (v0.5) adds, read only where every run of a group was analyzed under
/// it: the service's detection time, which issue 56's partition study read by hand.
const SCALARS_A4: &[(&str, &str, &str, bool, Extract)] = &[(
    "detection: confirmed impact to the service's first detection signal",
    "s",
    "secondary",
    false,
    |r| {
        let d = recovery(r)?
            .durations
            .iter()
            .find(|d| d.duration == "detection")
            .ok_or(Unmeasured::Reported("no detection duration read".into()))?;
        d.seconds
            .ok_or_else(|| Unmeasured::Reported(d.note.clone()))
    },
)];

/// The run's testbed change (A4) where it is one of `kinds`; why not otherwise.
fn change<'r>(r: &'r Report, kinds: &[&str]) -> Result<&'r ChangeReport, Unmeasured> {
    let c = r
        .change
        .as_ref()
        .ok_or(Unmeasured::Reported("no testbed change read".into()))?;
    if kinds.contains(&c.change) {
        Ok(c)
    } else {
        Err(Unmeasured::Reported(format!(
            "not applicable to a {}",
            c.change
        )))
    }
}

/// The length of the change's first span that `wanted` picks, s.
fn change_span(c: &ChangeReport, wanted: impl Fn(&str) -> bool) -> Result<f64, Unmeasured> {
    c.spans
        .iter()
        .find(|s| wanted(&s.span))
        .map(|s| s.seconds)
        .ok_or_else(|| {
            Unmeasured::Reported(format!(
                "the {} journaled no such span ({})",
                c.change, c.ended
            ))
        })
}

/// The first request served after `boundary` (the earliest where the change has several), s.
fn change_first(c: &ChangeReport, boundary: &str) -> Result<f64, Unmeasured> {
    c.firsts
        .iter()
        .flat_map(|f| &f.after)
        .filter(|a| a.boundary == boundary)
        .map(|a| a.seconds)
        .reduce(f64::min)
        .ok_or_else(|| Unmeasured::Reported(format!("no request served after {boundary}")))
}

const EVERY_CHANGE: &[&str] = &["rollout", "rollback", "scale-out", "proxy failover"];
const NEW_REPLICAS: &[&str] = &["rollout", "rollback", "scale-out"];

/// A testbed change's scalars (SPEC §10 "Reading a testbed change", v0.5), read in place of a
/// fault's where every run of a group holds a change; a kind of change without a scalar's
/// boundaries says so.
const SCALARS_CHANGE: &[(&str, &str, &str, bool, Extract)] = &[
    (
        "change: its length (a rollout's whole, a scale-out's decision to in service, a failover's kill to every replica up)",
        "s",
        "primary",
        true,
        |r| {
            change_span(change(r, EVERY_CHANGE)?, |s| {
                s.starts_with("the whole ")
                    || s == "decision to in service"
                    || s == "the kill to every replica up"
            })
        },
    ),
    (
        "change: the first new replica's process start to its weights-loaded line",
        "s",
        "secondary",
        true,
        |r| {
            change_span(change(r, NEW_REPLICAS)?, |s| {
                s == "process start to its weights-loaded line"
                    || (s.starts_with("step 1: ")
                        && s.ends_with("process start to its weights-loaded line"))
            })
        },
    ),
    (
        "change: proxy down, the kill to its new process",
        "s",
        "secondary",
        false,
        |r| {
            change_span(change(r, &["proxy failover"])?, |s| {
                s == "down, the kill to its new process"
            })
        },
    ),
    (
        "change: first served after the proxy's restart",
        "s",
        "secondary",
        false,
        |r| change_first(change(r, &["proxy failover"])?, "the restart"),
    ),
    (
        "change: first served by a new replica after it entered service",
        "s",
        "secondary",
        false,
        |r| change_first(change(r, NEW_REPLICAS)?, "in service"),
    ),
    (
        "change: requests sent while it ran that did not complete",
        "share",
        "secondary",
        false,
        |r| {
            let c = change(r, EVERY_CHANGE)?;
            let g = c
                .requests
                .iter()
                .find(|g| g.group.starts_with("sent "))
                .ok_or(Unmeasured::NothingScheduled)?;
            let completed: u64 = g
                .classes
                .iter()
                .filter(|k| k.class == "correct-success")
                .map(|k| k.n)
                .sum();
            if g.n == 0 {
                return Err(Unmeasured::NothingScheduled);
            }
            Ok((g.n - completed) as f64 / g.n as f64)
        },
    ),
];

/// The scalars A3 (v0.4) adds, read only where every run of a group was analyzed under it: the
/// survivor over the outage and over the recovery apart (SPEC §5 "What v0.4 reads"), with the n
/// each share rests on.
const SCALARS_A3: &[(&str, &str, &str, bool, Extract)] = &[
    (
        "outage: duration, fire anchor to confirmed removal",
        "s",
        "secondary",
        false,
        |r| {
            let s = span(r, "outage")?;
            let rec = recovery(r)?;
            s.to_s
                .map(|to| to - rec.fire_anchor_s)
                .ok_or_else(|| Unmeasured::Reported(s.note.clone()))
        },
    ),
    (
        "outage: TTFT p50 (conditional on completion)",
        "ms",
        "secondary",
        false,
        |r| span_ttft(r, "outage"),
    ),
    ("outage: goodput", "share", "secondary", false, |r| {
        span_goodput(r, "outage")
    }),
    (
        "outage: requests scheduled",
        "requests",
        "secondary",
        false,
        |r| span_scheduled(r, "outage"),
    ),
    (
        "recovery: TTFT p50 (conditional on completion)",
        "ms",
        "secondary",
        false,
        |r| span_ttft(r, "recovery"),
    ),
    ("recovery: goodput", "share", "secondary", false, |r| {
        span_goodput(r, "recovery")
    }),
    (
        "recovery: requests scheduled",
        "requests",
        "secondary",
        false,
        |r| span_scheduled(r, "recovery"),
    ),
    (
        "in flight on the victim at fire: requests",
        "requests",
        "secondary",
        false,
        |r| {
            let f = r.in_flight_at_fire.as_ref().ok_or(Unmeasured::NeverFired)?;
            let o = f.on_lost.as_ref().unwrap_or(&f.on_victim);
            Ok((o.completed + o.errored + o.censored) as f64)
        },
    ),
    (
        "TTR to the two-replica pre-fault baseline: bound",
        "s",
        "secondary",
        true,
        |r| {
            let rec = recovery(r)?;
            bound_of(&rec.to_pre_fault)
        },
    ),
    (
        "TTR to the single-replica equilibrium: bound",
        "s",
        "secondary",
        true,
        |r| {
            let rec = recovery(r)?;
            bound_of(&rec.to_equilibrium)
        },
    ),
];

/// A recovery read as a bound at the detector's resolution (A3), or why this run has none: a
/// measured recovery says it was measured, so that it is not read as a bound dropped.
fn bound_of(ttr: &crate::model::Ttr) -> Result<f64, Unmeasured> {
    match (ttr.bound_s, ttr.ttr_s) {
        (Some(bound), _) => Ok(bound),
        (None, Some(_)) => Err(Unmeasured::MeasuredNotBound(ttr.text.clone())),
        (None, None) => Err(Unmeasured::Reported(ttr.text.clone())),
    }
}

/// A survivor span's TTFT p50, goodput and scheduled count (A3), or why it has none.
fn span_ttft(r: &Report, name: &'static str) -> Result<f64, Unmeasured> {
    let s = span(r, name)?;
    s.ttft_p50_ms
        .ok_or_else(|| Unmeasured::Reported(s.note.clone()))
}

fn span_goodput(r: &Report, name: &'static str) -> Result<f64, Unmeasured> {
    let s = span(r, name)?;
    s.goodput
        .ok_or_else(|| Unmeasured::Reported(s.note.clone()))
}

fn span_scheduled(r: &Report, name: &'static str) -> Result<f64, Unmeasured> {
    Ok(span(r, name)?.scheduled as f64)
}

fn span<'a>(
    r: &'a Report,
    name: &'static str,
) -> Result<&'a crate::model::SurvivorReading, Unmeasured> {
    recovery(r)?
        .survivor
        .iter()
        .find(|s| s.span == name)
        .ok_or(Unmeasured::NoSpan(name))
}

fn window<'a>(
    r: &'a Report,
    name: &'static str,
) -> Result<&'a crate::model::WindowReport, Unmeasured> {
    r.windows
        .iter()
        .find(|w| w.window == name)
        .ok_or(Unmeasured::NoWindow(name))
}

/// The share (%) of the requests in flight on the victim at fire that `count` picks.
fn victim_share(r: &Report, count: fn(&crate::model::Outcomes) -> u64) -> Result<f64, Unmeasured> {
    let f = r.in_flight_at_fire.as_ref().ok_or(Unmeasured::NeverFired)?;
    // A4 (v0.5): the victim's and the never answered, as G3 reads them.
    let o = f.on_lost.as_ref().unwrap_or(&f.on_victim);
    let n = o.completed + o.errored + o.censored;
    let min = pins::value::STATISTICS_SHARE_MIN_REQUESTS as u64;
    if n > 0 && n < min && r.rules.shares == ShareSupport::Counted {
        return Err(Unmeasured::TooFewInFlight { n, min });
    }
    (n > 0)
        .then(|| count(o) as f64 / n as f64 * 100.0)
        .ok_or(Unmeasured::NothingInFlight)
}

fn ttft_p50(r: &Report, name: &'static str) -> Result<f64, Unmeasured> {
    let w = window(r, name)?;
    w.ttft
        .percentiles_us
        .iter()
        .find(|(q, _)| q == "p50")
        .map(|(_, us)| *us as f64 / 1000.0)
        .ok_or(Unmeasured::NoCompletion(name))
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

/// The scalars read on the recovery's grid: the detector's goodput buckets, and the readiness
/// probes a fault run sends once per bucket (§10). Runs that differ by less than one bucket are
/// not told apart by them.
const ON_THE_GRID: &[&str] = &[
    "TTR to the single-replica equilibrium",
    "TTR to the two-replica pre-fault baseline",
    "outage: duration, fire anchor to confirmed removal",
];

/// A scalar in words. `grid_s`, under v0.5 for a scalar read on the recovery's grid: the
/// grid's step, so that a spread below it is not printed as a run-to-run CV of nothing (issue
/// 52: a campaign CV of 0.000 that was the 200 ms probe grid).
fn describe(
    (name, unit, heavy): (&str, &str, bool),
    s: &Option<Summary>,
    values: &[(String, f64)],
    grid_s: Option<f64>,
) -> String {
    let list: Vec<String> = values.iter().map(|(_, v)| format!("{v:.3}")).collect();
    match s {
        None => format!("{name}: no run measured it"),
        Some(s) => {
            let interval = s.t_interval.map_or_else(
                || s.t_interval_note.clone().unwrap_or_default(),
                |(a, b)| {
                    format!(
                        "t-interval (t = {}) [{a:.3}, {b:.3}]",
                        pins::value::STATISTICS_T_QUANTILE_DF4
                    )
                },
            );
            let cv = s
                .coefficient_of_variation
                .map_or("n/a".into(), |c| format!("{c:.3}"));
            let cv = match grid_s {
                Some(grid) if s.n > 1 && s.max - s.min < grid => format!(
                    "{cv}, which is the grid: the runs lie within one {grid:.3} s step of the recovery's buckets and readiness probes, below what they resolve"
                ),
                _ => cv,
            };
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

/// The runs grouped by (variant, configuration hash), each group with its drops, G5 and every
/// scalar over its valid runs.
pub fn groups(runs: &[RunRef<'_>]) -> Vec<Group> {
    let mut by_config: BTreeMap<(String, String), Vec<&RunRef<'_>>> = BTreeMap::new();
    for run in runs {
        let key = (
            run.report.provenance.fault_variant.clone(),
            run.design.to_owned(),
        );
        by_config.entry(key).or_default().push(run);
    }
    let expected = pins::value::CAMPAIGN_RUNS as usize;
    let mut groups = Vec::new();
    for ((variant, design_hash), members) in &by_config {
        let mut dropped = Vec::new();
        let valid: Vec<&&RunRef<'_>> = members
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
        let (capacity, refused) = capacity(members);
        let valid = match refused {
            Some(why) => {
                dropped.extend(valid.iter().map(|r| format!("{}: {why}", r.name)));
                Vec::new()
            }
            None => valid,
        };
        let a3 = members
            .iter()
            .all(|r| r.report.rules.survivor == SurvivorSpan::OutageThenRecovery);
        // v0.5 (A4) says where a scalar's spread is below the grid it is read on.
        let grid = members
            .iter()
            .all(|r| r.report.rules.words == ReadingWords::WhatWasMeasured)
            .then(|| {
                valid
                    .iter()
                    .find_map(|r| r.report.recovery.as_ref().map(|rec| rec.bucket_s))
            })
            .flatten();
        // A testbed change's group reads the change's scalars, not a fault's (v0.5).
        let changed = members.iter().all(|r| r.report.change.is_some());
        let a4 = members
            .iter()
            .all(|r| r.report.rules.words == ReadingWords::WhatWasMeasured);
        let scalars = if changed { SCALARS_CHANGE } else { SCALARS }
            .iter()
            .chain(if a3 && !changed { SCALARS_A3 } else { &[] })
            .chain(if a4 && !changed { SCALARS_A4 } else { &[] })
            .map(|&(name, unit, role, heavy, extract)| {
                let mut values = Vec::new();
                let mut missing = Vec::new();
                for r in &valid {
                    match extract(r.report) {
                        Ok(v) if v.is_finite() => values.push((r.name.to_owned(), v)),
                        Ok(_) => missing.push(format!("{}: not a finite number", r.name)),
                        Err(why) => missing.push(format!("{}: {why}", r.name)),
                    }
                }
                let numbers: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
                let summary = summary(&numbers);
                let grid_s = grid.filter(|_| ON_THE_GRID.contains(&name));
                let text = describe((name, unit, heavy), &summary, &values, grid_s);
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
            design_hash: design_hash.clone(),
            config_hashes: members.iter().fold(Vec::new(), |mut all, r| {
                if !all.contains(&r.report.provenance.config_hash) {
                    all.push(r.report.provenance.config_hash.clone());
                }
                all
            }),
            runs: members.iter().map(|r| r.name.to_owned()).collect(),
            dropped,
            g5,
            capacity,
            scalars,
        });
    }

    groups
}

/// The recovery reports of the valid clean-delete runs (the headline's measured segments).
pub fn clean_delete_recoveries<'a>(runs: &[RunRef<'a>]) -> Vec<&'a RecoveryReport> {
    runs.iter()
        .filter(|r| r.report.validity.valid && r.report.provenance.fault_variant == "clean-delete")
        .filter_map(|r| r.report.recovery.as_ref())
        .collect()
}

/// The capacity check across a group's runs (§10 "Capacity check", v0.5): their probes' medians
/// must lie within the pinned tolerance of each other, or the group is refused (the runs were
/// not taken at one capacity, so the load's multiples of lambda_max differ between them). The
/// reading, `None` under a version without the check; and why the group is refused, if it is.
fn capacity(members: &[&RunRef<'_>]) -> (Option<String>, Option<String>) {
    let checked = members
        .iter()
        .all(|r| r.report.rules.capacity == CapacityCheck::AgainstCalibration);
    if !checked || members.is_empty() {
        return (None, None);
    }
    if members
        .iter()
        .all(|r| r.report.provenance.target_kind == "mock")
    {
        return (
            Some("not applicable (the mock is built to its capacity)".into()),
            None,
        );
    }
    let without: Vec<&str> = members
        .iter()
        .filter(|r| r.probe_ms.is_none())
        .map(|r| r.name)
        .collect();
    if !without.is_empty() {
        return (
            Some(format!(
                "not checked: {} hold(s) no capacity probe (target.preflight = false, a configuration without a calibration, a recorder older than the probe, or no sample answered)",
                without.join(", ")
            )),
            None,
        );
    }
    let probes: Vec<(&str, f64)> = members
        .iter()
        .filter_map(|r| r.probe_ms.map(|p| (r.name, p)))
        .collect();
    let low = probes.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let high = probes.iter().map(|p| p.1).fold(0.0, f64::max);
    let apart = probe::apart(low, high) * 100.0;
    let tolerance = pins::value::CALIBRATION_CAPACITY_TOLERANCE_PERCENT as f64;
    let listed = probes
        .iter()
        .map(|(name, ms)| format!("{name} {ms:.1} ms"))
        .collect::<Vec<_>>()
        .join(", ");
    if apart <= tolerance {
        (
            Some(format!(
                "pass: the runs' capacity probes lie within {apart:.1} % of each other (at most {tolerance} %): {listed}"
            )),
            None,
        )
    } else {
        (
            Some(format!(
                "fail: the runs' capacity probes lie {apart:.1} % apart (more than {tolerance} %): {listed}"
            )),
            Some(format!(
                "refused with its group: the runs' capacity probes lie {apart:.1} % apart, more than {tolerance} % (§10 \"Capacity check\"): they were not taken at one capacity, so the load's multiples of lambda_max differ between them; run each host's campaign against its own calibration"
            )),
        )
    }
}

/// G5: the accelerator fingerprints must be equal across a group's runs (self-hosted only).
fn g5(members: &[&RunRef<'_>]) -> String {
    let kind = members
        .first()
        .map_or("", |r| r.report.provenance.target_kind.as_str());
    match kind {
        "mock" => "not applicable (the mock has no accelerator)".into(),
        "hosted" => "not evaluable (hosted, §6)".into(),
        _ => {
            if members.iter().any(|r| r.accelerator.is_empty()) {
                "unobserved, which fails the group (§10): a journal carries no accelerator.* host facts; give each replica a collector in target.accelerator_commands (an nvidia-smi query of its model, clocks and power limit)".into()
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

/// The scalar `name` of one run, as a campaign reads it: its value or why it has none.
#[cfg(test)]
pub(crate) fn reading(report: &Report, name: &str) -> Option<Result<f64, Unmeasured>> {
    SCALARS
        .iter()
        .chain(SCALARS_A3)
        .chain(SCALARS_A4)
        .chain(SCALARS_CHANGE)
        .find(|s| s.0 == name)
        .map(|s| (s.4)(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(values: &[f64], grid_s: Option<f64>) -> String {
        let named: Vec<(String, f64)> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| (format!("run-{i}"), v))
            .collect();
        let name = "outage: duration, fire anchor to confirmed removal";
        describe((name, "s", false), &summary(values), &named, grid_s)
    }

    #[test]
    fn a_spread_below_the_grid_is_not_a_run_to_run_cv() {
        // Five outages read at the replacement's first ready probe, all in one 0.2 s step:
        // the CV of 0 is the grid's, and v0.5 says so.
        let same = [6.2, 6.2, 6.2, 6.2, 6.2];
        let said = text(&same, Some(0.2));
        assert!(
            said.contains("CV 0.000, which is the grid: the runs lie within one 0.200 s step"),
            "{said}"
        );
        // Spread over more than a step: a CV the grid can resolve, said as before.
        let apart = [6.2, 6.4, 6.2, 6.6, 6.2];
        assert!(!text(&apart, Some(0.2)).contains("which is the grid"));
        // Older versions, or a scalar off the grid, print the CV alone.
        assert!(!text(&same, None).contains("which is the grid"));
        assert!(text(&same, None).contains("CV 0.000;"));
        // One run has no run-to-run spread to speak of.
        assert!(!text(&[6.2], Some(0.2)).contains("which is the grid"));
    }
}
