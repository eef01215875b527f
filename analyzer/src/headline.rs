//! The pre-committed headline (SPEC appendix): one sentence whose slots are filled from measured
//! summaries only, and say `[not measured]` otherwise. A pure function over the run-level
//! summaries, called by `analyze` for one run and by `campaign` over the five runs of each
//! variant.

use crate::estimate::runs;
use crate::model::{Group, RecoveryReport, Report, Summary};
use crate::summaries::{self, RunRef};
use percentes_formats::spec::{HeadlineSlots, ReadingWords, Rules, SurvivorSpan};

/// The headline of one run alone (a report's own line).
pub fn of_run(report: &Report) -> String {
    let run = [RunRef {
        name: "this run",
        report,
        accelerator: &[],
        design: &report.provenance.config_hash,
        probe_ms: None,
    }];
    sentence(
        &summaries::groups(&run),
        &summaries::clean_delete_recoveries(&run),
        &report.rules,
    )
}

const EMPTY: &str = "[not measured]";

/// The pre-committed headline (SPEC appendix) under `rules`: v0.1 to v0.3's sentence, or A3's
/// (v0.4 on), each slot from a measurement or saying why not.
pub fn sentence(groups: &[Group], clean_delete: &[&RecoveryReport], rules: &Rules) -> String {
    match rules.survivor {
        SurvivorSpan::FaultWindow => archived(groups, clean_delete),
        SurvivorSpan::OutageThenRecovery => a3(groups, clean_delete, (rules.headline, rules.words)),
    }
}

/// The sentence with no run to fill it: every slot `[not measured]`.
pub fn unmeasured() -> String {
    archived(&[], &[])
}

/// The variant whose runs fill the survivor and recovery slots: clean delete, or under A4
/// (v0.5) black-hole where the runs hold no clean delete but a black-hole.
fn lead(groups: &[Group], slots: HeadlineSlots) -> &'static str {
    let has = |variant: &str| groups.iter().any(|g| g.variant == variant);
    match slots {
        HeadlineSlots::PrimaryElseBlackHole if !has("clean-delete") && has("black-hole") => {
            "black-hole"
        }
        _ => "clean-delete",
    }
}

/// v0.1 to v0.3's sentence: a slot not measured is `[not measured]`.
fn archived(groups: &[Group], clean_delete: &[&RecoveryReport]) -> String {
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
    let (segments, dominant) = segments(clean_delete);
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
        ttr.as_ref().map_or(EMPTY.to_owned(), |s| format!(
            "{:.1} s{}",
            s.median,
            relapses(clean_delete)
        )),
        segments,
        dominant,
    )
}

/// Under v0.3 (A2), how many of the runs relapsed after the recovery the TTR reads, said beside
/// it (empty when none did, and always under v0.1 and v0.2).
fn relapses(reports: &[&RecoveryReport]) -> String {
    let relapsed = reports
        .iter()
        .filter(|r| {
            r.to_pre_fault
                .flags
                .iter()
                .any(|f| f.starts_with("relapsed"))
        })
        .count();
    if relapsed == 0 {
        String::new()
    } else {
        format!(
            " (then relapsed in {relapsed} of {} runs: goodput fell below the exit threshold again)",
            reports.len()
        )
    }
}

/// Whether a boundary `at` seconds after the anchor may be named as a measured segment of the
/// TTR it qualifies: always under v0.1 and v0.2; under v0.3 (A2) only at or before that TTR.
fn within_ttr(report: &RecoveryReport, at: f64) -> bool {
    let ttr = report.to_pre_fault.ttr_s.or(report.to_pre_fault.bound_s);
    report.amended.is_none() || ttr.is_some_and(|ttr| at <= ttr)
}

/// One slot of A3's sentence: a measured summary, or why there is none.
enum Slot {
    Measured(Summary),
    /// No run of the variant the slot reads: the slot does not apply.
    NotApplicable(String),
    /// Runs of the variant, none of which measured it: the first run's reason.
    NotMeasured(String),
}

impl Slot {
    fn of(groups: &[Group], variant: &str, scalar: &str) -> Slot {
        let mut of_variant = groups.iter().filter(|g| g.variant == variant);
        let Some(group) = of_variant.next() else {
            return Slot::NotApplicable(format!("no {variant} run"));
        };
        // Two configurations of one variant are two experiments: the sentence does not pick one.
        let others = of_variant.count();
        if others > 0 {
            return Slot::NotMeasured(format!(
                "{} configurations of {variant} in this campaign, and the headline reads one; each group's scalars are given apart",
                others + 1
            ));
        }
        match group.scalars.iter().find(|s| s.name == scalar) {
            Some(s) => match &s.summary {
                Some(summary) => Slot::Measured(summary.clone()),
                None => Slot::NotMeasured(s.dropped.first().map_or_else(
                    || "no valid run".to_owned(),
                    |why| {
                        why.split_once(": ")
                            .map_or(why.as_str(), |(_, w)| w)
                            .to_owned()
                    },
                )),
            },
            None => Slot::NotMeasured("not read under this version".into()),
        }
    }

    /// The summary's median in `fmt`, or the bracketed reason.
    fn text(&self, fmt: impl Fn(&Summary) -> String) -> String {
        match self {
            Slot::Measured(s) => fmt(s),
            Slot::NotApplicable(why) => format!("[not applicable: {why}]"),
            Slot::NotMeasured(why) => format!("[not measured: {why}]"),
        }
    }
}

/// A count over the runs: `k`, or `min-max per run`.
fn count(n: &Slot) -> String {
    match n {
        Slot::Measured(s) if s.min == s.max => format!("{:.0}", s.min),
        Slot::Measured(s) => format!("{:.0}-{:.0} per run", s.min, s.max),
        _ => "?".into(),
    }
}

/// A3's reading of a TTR of `variant`'s runs (`measured`, or its `: bound` scalar): after a
/// measured time, or within R of `of` (the fire, the removal) at the detector's resolution, or
/// why not.
fn a3_ttr(
    groups: &[Group],
    variant: &str,
    (measured, of): (&str, &str),
    runs: impl Fn(&Summary) -> String,
) -> String {
    let cd = |scalar: &str| Slot::of(groups, variant, scalar);
    match cd(measured) {
        Slot::Measured(s) => format!("after {:.1} s{}", s.median, runs(&s)),
        other => match cd(&format!("{measured}: bound")) {
            Slot::Measured(b) => format!(
                "within R of {of} (by {:.1} s after the fire{}), the detector's resolution: a bound, not a measured time",
                b.median,
                runs(&b)
            ),
            _ => other.text(|_| String::new()),
        },
    }
}

/// A3's decomposition slots: the measured segments and the largest, or why there are none.
fn a3_segments(groups: &[Group], clean_delete: &[&RecoveryReport]) -> (String, String) {
    if !groups.iter().any(|g| g.variant == "clean-delete") {
        let none = "[not applicable: no clean-delete run]".to_owned();
        return (none.clone(), none);
    }
    let why = |slot: String| {
        if slot == EMPTY {
            "[not measured: no boundary was measured, before the recovery it would qualify, in every run]".to_owned()
        } else {
            slot
        }
    };
    let (segments, dominant) = segments(clean_delete);
    (why(segments), why(dominant))
}

/// A campaign figure's spread after its median, scaled as the median is printed: nothing for
/// one run.
fn over_runs(s: &Summary, scale: f64, unit: &str) -> String {
    if s.n > 1 {
        format!(
            " (median over {} runs, range {:.1}-{:.1}{unit})",
            s.n,
            s.min * scale,
            s.max * scale
        )
    } else {
        String::new()
    }
}

/// A3's sentence (v0.4, SPEC appendix): the survivor over the outage and the recovery apart,
/// every share with its n, a recovery at the detector's resolution as a bound, and every slot
/// that is not a measurement saying whether it does not apply or why it was not measured.
fn a3(
    groups: &[Group],
    clean_delete: &[&RecoveryReport],
    (slots, words): (HeadlineSlots, ReadingWords),
) -> String {
    let lead = lead(groups, slots);
    // The survivor's and the recovery's slots read the lead variant's runs.
    let cd = |scalar: &str| Slot::of(groups, lead, scalar);
    let clean = |scalar: &str| Slot::of(groups, "clean-delete", scalar);
    let bh = |scalar: &str| Slot::of(groups, "black-hole", scalar);
    let runs = |s: &Summary| over_runs(s, 1.0, "");
    let percent_of = |share: Slot, n: Slot| {
        share.text(|s| format!("{:.1} % of {}{}", s.median, count(&n), runs(s)))
    };
    let in_flight =
        |slot: Slot| percent_of(slot, clean("in flight on the victim at fire: requests"));
    let bh_in_flight = |slot: Slot| {
        let n = bh("in flight on the victim at fire: requests");
        percent_of(slot, n)
    };
    let goodput = |span: &str| {
        cd(&format!("{span}: goodput")).text(|s| {
            format!(
                "{:.1} % of {}{}",
                s.median * 100.0,
                count(&cd(&format!("{span}: requests scheduled"))),
                // A share's median prints as a percentage, and so does its range.
                over_runs(s, 100.0, " %")
            )
        })
    };
    let ms = |slot: Slot| slot.text(|s| format!("{:.0} ms{}", s.median, runs(s)));
    let ttr = |measured: &str, of: &str| a3_ttr(groups, lead, (measured, of), runs);
    let (segments, dominant) = a3_segments(groups, clean_delete);
    // A4: a sentence whose survivor slots read black-hole runs says so.
    let whose = if lead == "clean-delete" {
        ""
    } else {
        "in the black-hole runs, "
    };
    // A4 (issue 52): a deletion's removal is confirmed by its replacement's first answered
    // ready probe; the sentence says so rather than leave "removal" to be read as the delete.
    let removal = match (words, lead) {
        (ReadingWords::WhatWasMeasured, "clean-delete") => {
            "its confirmed removal, the replacement's first answered ready probe"
        }
        _ => "its confirmed removal",
    };
    format!(
        "Under clean delete, {} of the requests in flight on the lost replica failed; under black-hole, {} failed and {} timed out. \
         While the lost replica was out ({whose}{} from the fire to {removal}), the service's time to first token (conditional on completion) was {} against {} over the baseline, and its goodput {}; over the recovery that followed, {} and {}. \
         The survivor settled into its single-replica equilibrium {}; the two-replica baseline returned {}, of which {} were measured, {} the largest.",
        in_flight(clean("in flight on the victim at fire: failed")),
        bh_in_flight(bh("in flight on the victim at fire: failed")),
        bh_in_flight(bh("in flight on the victim at fire: timed out")),
        cd("outage: duration, fire anchor to confirmed removal")
            .text(|s| format!("{:.1} s{}", s.median, runs(s))),
        ms(cd("outage: TTFT p50 (conditional on completion)")),
        ms(cd("baseline TTFT p50 (conditional on completion)")),
        goodput("outage"),
        ms(cd("recovery: TTFT p50 (conditional on completion)")),
        goodput("recovery"),
        ttr("TTR to the single-replica equilibrium", "the fire"),
        ttr("TTR to the two-replica pre-fault baseline", "the removal"),
        segments,
        dominant,
    )
}

/// The measured decomposition segments of the clean-delete runs: which boundaries every run
/// measured, and the segment (anchor to the first, then between consecutive ones) with the
/// largest median length.
fn segments(reports: &[&RecoveryReport]) -> (String, String) {
    let Some(first) = reports.first() else {
        return (EMPTY.into(), EMPTY.into());
    };
    let measured: Vec<&str> = first
        .decomposition
        .iter()
        .map(|b| b.boundary)
        .filter(|name| {
            reports.iter().all(|r| {
                r.decomposition.iter().any(|b| {
                    b.boundary == *name
                        && !b.out_of_order
                        && b.since_anchor_s.is_some_and(|at| within_ttr(r, at))
                })
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
        if let Some(s) = runs::summarize(&lengths)
            && best.as_ref().is_none_or(|(_, b)| s.median > *b)
        {
            best = Some((
                format!("{previous} to {name} ({:.1} s)", s.median),
                s.median,
            ));
        }
        previous = name;
    }
    (
        measured.join(", "),
        best.map_or(EMPTY.into(), |(text, _)| text),
    )
}
