//! The recovery report of a fault run (SPEC §5, seeds/004): the goodput series, time to recovery
//! against both baselines, the plateau, the 27-cell sweep, the integrated deficit, per-component
//! recovery, the measured decomposition, and the failure-injection timeline.
//!
//! Every duration is in seconds of the run (dev runs are time-compressed, and say so elsewhere).
//! The detector works in buckets: the pinned R, H and bucket are all dev-scaled by the same
//! factor, so R = 10 buckets and H = 30 buckets in every profile.

use percentes_formats::config::FaultVariant;
use percentes_formats::pins;

use crate::estimate::recovery::{self, Bucket, Detection, Detector, Plateau};
use crate::frame::Requests;
use crate::load::Run;
use crate::model::*;
use crate::windows::{Kind, Timeline, Window};
use percentes_formats::spec::{RecoveryRules, Spec};

mod amended;
mod fidelity;
mod parts;
mod timeline;

use amended::Rules;
use parts::{components, decomposition};
use timeline::injection_timeline;

/// The caveats that travel with every TTR (§5).
pub const CAVEATS: [&str; 2] = [
    "the plateau is a measured operating point held by the offered load and the timeout shedding work, not a queueing-theory steady state",
    "the plateau window ends at this run's recovery to the pre-fault baseline, so the equilibrium is not independent of that detection",
];

/// The caveats under amendment A2 (v0.3), where the plateau ends at the confirmed removal or
/// where the recovering window starts, whichever is first.
pub const CAVEATS_A2: [&str; 2] = [
    CAVEATS[0],
    "the plateau window ends at the fault's confirmed removal or where the window that recovered to the pre-fault baseline starts, whichever is first, so it is bounded by that detection without containing it",
];

pub(super) fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A per-bucket series of "good" shares: `good(row)` decides each scheduled request.
pub(super) fn series_of(
    requests: &Requests,
    bucket_ns: u64,
    end_ns: u64,
    good: impl Fn(usize) -> bool,
) -> Vec<Bucket> {
    let buckets = usize::try_from(end_ns / bucket_ns).unwrap_or(0);
    let mut series = vec![Bucket::default(); buckets];
    for row in 0..requests.len() {
        if let Some(b) = series.get_mut((requests.intended_ns[row] / bucket_ns) as usize) {
            b.scheduled += 1;
            b.met += u64::from(good(row));
        }
    }
    series
}

pub(super) fn ttr(detection: Detection, bucket_ns: u64, anchor_ns: u64, timeout_s: f64) -> Ttr {
    match detection {
        Detection::Recovered { entry_end_s, .. } => {
            let at = entry_end_s * bucket_ns;
            let value = seconds(at.saturating_sub(anchor_ns));
            Ttr {
                status: "recovered".into(),
                ttr_s: Some(value),
                at_s: Some(seconds(at)),
                text: format!("{value:.3} s"),
                flags: Vec::new(),
            }
        }
        Detection::NotRecovered => Ttr {
            status: "not recovered within the recovery timeout".into(),
            ttr_s: None,
            at_s: None,
            text: format!("not recovered within {timeout_s:.3} s"),
            flags: Vec::new(),
        },
        Detection::Unreadable { reason } => Ttr {
            status: "not determined".into(),
            ttr_s: None,
            at_s: None,
            text: format!("not determined: {reason} (A2)"),
            flags: Vec::new(),
        },
        Detection::NoBaseline => Ttr {
            status: "no baseline".into(),
            ttr_s: None,
            at_s: None,
            text: "no baseline goodput to recover to".into(),
            flags: Vec::new(),
        },
    }
}

pub(super) fn not_applicable(why: &str) -> Ttr {
    Ttr {
        status: "N/A".into(),
        ttr_s: None,
        at_s: None,
        text: format!("N/A: {why}"),
        flags: Vec::new(),
    }
}

/// The recovery boundary that cuts the fault window from the recovery window (§3, §5): the
/// pinned detector's recovery to the pre-fault `baseline` window's goodput, under `spec`'s rules.
pub fn boundary(
    run: &Run,
    met: &[bool],
    timeline: &Timeline,
    baseline: Window,
    spec: Spec,
) -> Option<Detection> {
    let fault = timeline.fault?;
    let requests = &run.requests;
    let bucket_ns = run.config.duration_ns(&pins::RECOVERY_BUCKET_S).max(1);
    let series = series_of(requests, bucket_ns, timeline.measured_end_ns, |r| met[r]);
    let rows: Vec<usize> = (0..requests.len())
        .filter(|&r| baseline.contains(requests.intended_ns[r]))
        .collect();
    let goodput = (!rows.is_empty())
        .then(|| rows.iter().filter(|&&r| met[r]).count() as f64 / rows.len() as f64)?;
    let anchor_ns = fault.anchor_ns();
    let anchor = usize::try_from(anchor_ns.div_ceil(bucket_ns)).unwrap_or(0);
    let rules = match spec.rules().recovery {
        RecoveryRules::Original => Rules::original(),
        RecoveryRules::Amended => Rules {
            amended: Some(amended::plan(
                run,
                Some((
                    rows.len() as u64,
                    (baseline.end_ns - baseline.start_ns) / bucket_ns,
                )),
                bucket_ns,
                &decomposition(run, anchor_ns),
            )),
        },
    };
    Some(rules.pre_fault(&series, anchor, goodput, rules.detector()))
}

/// Runs the §5 analysis under `spec`. `met` is the SLO verdict per row; `timeline` and `cut` as
/// analyzed; `valid` whether the run passed its gates. v0.1 and v0.2 analyze valid runs only;
/// v0.3 also reports an invalid run's timeline and evidence, with every recovery figure withheld.
#[allow(clippy::too_many_arguments)]
pub fn analyze(
    run: &Run,
    met: &[bool],
    timeline: &Timeline,
    cut: &[Window],
    gates: &[Gate],
    spec: Spec,
    valid: bool,
) -> Option<RecoveryReport> {
    let amended = spec.rules().recovery == RecoveryRules::Amended;
    if !valid && !amended {
        return None;
    }
    let fault = timeline.fault?;
    let config = &run.config;
    let requests = &run.requests;
    let bucket_ns = config.duration_ns(&pins::RECOVERY_BUCKET_S).max(1);
    let anchor_ns = fault.anchor_ns();
    let anchor = usize::try_from(anchor_ns.div_ceil(bucket_ns)).unwrap_or(0);
    let timeout_ns = config.duration_ns(&pins::EXPERIMENT_RECOVERY_TIMEOUT_S);
    let timeout_buckets = usize::try_from(timeout_ns / bucket_ns).unwrap_or(0);
    let end_ns = timeline.measured_end_ns;
    let series = series_of(requests, bucket_ns, end_ns, |r| met[r]);
    let baseline_window = cut.iter().find(|w| w.kind == Kind::Baseline).copied();
    let base = baseline_window.map(|w| {
        let rows: Vec<usize> = (0..requests.len())
            .filter(|&r| w.contains(requests.intended_ns[r]))
            .collect();
        let goodput = (!rows.is_empty())
            .then(|| rows.iter().filter(|&&r| met[r]).count() as f64 / rows.len() as f64);
        (w, rows, goodput)
    });
    let baseline_goodput = base.as_ref().and_then(|b| b.2);
    let bucket_s = seconds(bucket_ns);
    // A bucket edge in seconds: v0.3 computes it from whole nanoseconds, so report.json carries
    // 4.77, not 4.7700000000000005; v0.1 and v0.2 keep their archived arithmetic.
    let edge = |b: u64| {
        if amended {
            seconds(b * bucket_ns)
        } else {
            b as f64 * bucket_s
        }
    };
    let timeout_s = seconds(timeout_ns);
    let decomposition = decomposition(run, anchor_ns);
    let rules = if amended {
        let scheduled = base
            .as_ref()
            .map(|(w, rows, _)| (rows.len() as u64, (w.end_ns - w.start_ns) / bucket_ns));
        Rules {
            amended: Some(amended::plan(run, scheduled, bucket_ns, &decomposition)),
        }
    } else {
        Rules::original()
    };
    let detector = rules.detector();

    let detect = |series: &[Bucket], baseline: Option<f64>, detector: Detector| {
        baseline.map_or(Detection::NoBaseline, |g| {
            rules.pre_fault(series, anchor, g, detector)
        })
    };
    let pre = detect(&series, baseline_goodput, detector);
    let plateau = rules.plateau(
        &series,
        anchor,
        timeout_buckets,
        pre,
        detector.window_s as usize,
    );
    let (equilibrium, mut to_equilibrium) = match plateau {
        Plateau::Estimable {
            from_s,
            to_s,
            goodput,
        } => (
            PlateauReport {
                estimable: true,
                from_s: edge(from_s),
                to_s: edge(to_s),
                goodput: Some(goodput),
                note: "estimable: spans at least R with goodput above 0".into(),
            },
            match rules.equilibrium(&series, anchor, to_s as usize, goodput, detector) {
                // A2 looks for the settling inside the plateau only: say so, not "the timeout".
                Detection::NotRecovered if amended => Ttr {
                    status: "not settled".into(),
                    ttr_s: None,
                    at_s: None,
                    text: format!(
                        "not settled: no counting window stayed within 15 % of the plateau's goodput for H inside the plateau ({:.3}-{:.3} s)",
                        edge(from_s),
                        edge(to_s)
                    ),
                    flags: Vec::new(),
                },
                found => ttr(found, bucket_ns, anchor_ns, timeout_s),
            },
        ),
        Plateau::NotEstimable {
            from_s,
            to_s,
            reason,
        } => (
            PlateauReport {
                estimable: false,
                from_s: edge(from_s),
                to_s: edge(to_s),
                goodput: None,
                note: format!("not estimable: {reason}"),
            },
            not_applicable(&format!(
                "the single-replica equilibrium is not estimable ({reason})"
            )),
        ),
    };
    let mut to_pre_fault = ttr(pre, bucket_ns, anchor_ns, timeout_s);

    // The sweep: each cell's own detector, plateau and equilibrium.
    let mut sweep = Vec::new();
    let mut orderings = Vec::new();
    for cell in Detector::sweep() {
        let cell = rules.cell(cell);
        let pre_cell = detect(&series, baseline_goodput, cell);
        let plateau_cell = rules.plateau(
            &series,
            anchor,
            timeout_buckets,
            pre_cell,
            cell.window_s as usize,
        );
        let eq_cell = match plateau_cell {
            Plateau::Estimable { goodput, to_s, .. } => {
                ttr(
                    rules.equilibrium(&series, anchor, to_s as usize, goodput, cell),
                    bucket_ns,
                    anchor_ns,
                    timeout_s,
                )
                .ttr_s
            }
            Plateau::NotEstimable { .. } => None,
        };
        let pre_s = ttr(pre_cell, bucket_ns, anchor_ns, timeout_s).ttr_s;
        orderings.push(pre_s.zip(eq_cell).map(|(p, e)| p.total_cmp(&e)));
        sweep.push(SweepRow {
            entry_percent: (cell.entry * 100.0).round(),
            window_s: edge(cell.window_s),
            hold_s: edge(cell.hold_s),
            to_pre_fault_s: pre_s,
            to_equilibrium_s: eq_cell,
        });
    }
    let stable = orderings.windows(2).all(|w| w[0] == w[1]);
    let sweep_note = if stable {
        "every cell orders the two recovery times the same way".into()
    } else {
        "the ordering of the two recovery times changes across the sweep: no ordering claim is made (§5)".into()
    };

    let until = match pre {
        Detection::Recovered { entry_end_s, .. } => entry_end_s as usize,
        _ => anchor + timeout_buckets,
    };
    let relapse_at = match (pre, baseline_goodput) {
        (Detection::Recovered { entry_end_s, .. }, Some(g)) => rules.relapse(
            &series,
            entry_end_s as usize,
            anchor + timeout_buckets,
            g,
            detector,
        ),
        _ => None,
    };
    let relapse = relapse_at.map(|t| {
            format!(
                "goodput fell below the exit threshold ({:.0} % of the pre-fault baseline) again in the window ending {:.3} s after the fire, after this recovery had held for H: the recovery did not last. A degradation that builds slowly (a survivor's queue filling) can pass the hold first; this TTR understates the disruption, so read the goodput timeline and the sweep beside it",
                detector.exit * 100.0,
                edge((t + 1) as u64) - seconds(anchor_ns)
            )
        });
    let deficit = baseline_goodput.map(|g| recovery::deficit(&series, anchor, until, g) * bucket_s);

    let components = components(
        run,
        met,
        bucket_ns,
        end_ns,
        anchor,
        anchor_ns,
        base.as_ref().map(|b| b.1.as_slice()).unwrap_or(&[]),
        baseline_window,
        timeout_s,
        detector,
        &rules,
    );
    let (timeline_states, durations, experiment_invalid) = match &rules.amended {
        None => injection_timeline(run, timeline, fault, &to_pre_fault, gates),
        Some(plan) => timeline::ordered(run, timeline, fault, &to_pre_fault, gates, plan, valid),
    };

    let amended_report = rules.amended.as_ref().map(|plan| {
        let flags = amended::Flags {
            run,
            series: &series,
            anchor,
            anchor_ns,
            bucket_ns,
            baseline: baseline_goodput,
            detector,
            rules: &rules,
            plan,
        };
        to_pre_fault.flags = flags.pre_fault(pre, relapse_at);
        to_equilibrium.flags = flags.equilibrium(&to_equilibrium);
        flags.report(valid)
    });

    let black_hole = config.fault.variant == FaultVariant::BlackHole;
    let node_loss_label = black_hole.then(|| {
        let passed = |id: GateId| gates.iter().any(|g| g.id == id && g.passed());
        if passed(GateId::VictimSilence) && passed(GateId::Staleness) {
            "node-loss-representative (G3 and G4 passed)".to_owned()
        } else {
            "not node-loss-representative: G3 or G4 failed or was unobserved; reported as equivalent to the clean variant".to_owned()
        }
    });
    let partition_s = seconds(config.duration_ns(&pins::FAULT_PARTITION_S));
    let report = RecoveryReport {
        variant: config.fault.variant.name().into(),
        label: match config.fault.variant {
            FaultVariant::BlackHole => format!("partition heal: the same replica returns when the partition expires, so it cannot take less than the {partition_s:.3} s partition; no claim about recovery from node loss"),
            FaultVariant::Degradation => format!(
                "recovery from a degradation ({}) that lasted the pinned {:.3} s: a governed scenario, not the §1 replica-loss experiment, so the single-replica equilibrium is only descriptive",
                config.fault.mock_mode.as_deref().unwrap_or("exec"),
                seconds(config.duration_ns(&pins::FAULT_DEGRADATION_S))
            ),
            _ => "recovery".into(),
        },
        node_loss_label,
        bucket_s,
        window_s: edge(detector.window_s),
        hold_s: edge(detector.hold_s),
        timeout_s,
        fire_anchor_s: seconds(anchor_ns),
        pre_fault_baseline: BaselineReport {
            goodput: baseline_goodput,
            from_s: baseline_window.map_or(0.0, |w| seconds(w.start_ns)),
            to_s: baseline_window.map_or(0.0, |w| seconds(w.end_ns)),
            n: base.as_ref().map_or(0, |b| b.1.len() as u64),
        },
        to_pre_fault,
        equilibrium,
        to_equilibrium,
        caveats: if amended { CAVEATS_A2 } else { CAVEATS }.to_vec(),
        relapse,
        deficit_goodput_s: deficit,
        sweep,
        sweep_note,
        components,
        decomposition,
        timeline: timeline_states,
        durations,
        experiment_invalid,
        series: series
            .iter()
            .enumerate()
            .map(|(i, b)| SeriesPoint {
                t_s: edge(i as u64),
                goodput: (b.scheduled > 0).then(|| b.met as f64 / b.scheduled as f64),
                scheduled: b.scheduled,
            })
            .collect(),
        amended: amended_report,
    };
    Some(if valid {
        report
    } else {
        amended::withhold(report)
    })
}
