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
use crate::windows::{Kind, Timeline, Window};
use percentes_formats::spec::{
    Claims, DetectorResolution, JsonSeconds, RecoveryRules, Rules as SpecRules, SurvivorSpan,
    WideningRate,
};

mod amended;
mod bounds;
mod fidelity;
mod parts;
mod survivor;
mod timeline;

use crate::model::{
    BaselineReport, Gate, GateId, PlateauReport, RecoveryReport, SeriesPoint, SweepRow, Ttr,
};
use amended::RecoveryReading;
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
                bound_s: None,
            }
        }
        Detection::NotRecovered => Ttr {
            status: "not recovered within the recovery timeout".into(),
            ttr_s: None,
            at_s: None,
            text: format!("not recovered within {timeout_s:.3} s"),
            flags: Vec::new(),
            bound_s: None,
        },
        Detection::Unreadable { reason } => Ttr {
            status: "not determined".into(),
            ttr_s: None,
            at_s: None,
            text: format!("not determined: {reason} (A2)"),
            flags: Vec::new(),
            bound_s: None,
        },
        Detection::NoBaseline => Ttr {
            status: "no baseline".into(),
            ttr_s: None,
            at_s: None,
            text: "no baseline goodput to recover to".into(),
            flags: Vec::new(),
            bound_s: None,
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
        bound_s: None,
    }
}

/// The recovery boundary that cuts the fault window from the recovery window (§3, §5): the
/// pinned detector's recovery to the pre-fault `baseline` window's goodput, under `spec`'s rules,
/// and, under v0.4 (A3), the confirmed removal (ns) when the recovery lies within R of it: a
/// bound at the detector's resolution, not a measured time.
pub fn boundary(
    run: &Run,
    met: &[bool],
    timeline: &Timeline,
    baseline: Window,
    spec_rules: &SpecRules,
) -> Option<(Detection, Option<u64>)> {
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
    let rules = match spec_rules.recovery {
        RecoveryRules::Original => RecoveryReading::original(),
        RecoveryRules::Amended => RecoveryReading {
            amended: Some(amended::plan(
                run,
                per_bucket(
                    run,
                    spec_rules,
                    Some((
                        rows.len() as u64,
                        (baseline.end_ns - baseline.start_ns) / bucket_ns,
                    )),
                    bucket_ns,
                ),
                (bucket_ns, spec_rules.absence),
                &decomposition(run, anchor_ns, spec_rules.words),
            )),
        },
    };
    let detector = rules.detector();
    let detection = rules.pre_fault(&series, anchor, goodput, detector);
    let removal = rules.amended.as_ref().and_then(|p| p.removal_ns);
    let bounded_by = match (detection, removal, spec_rules.resolution) {
        (Detection::Recovered { entry_end_s, .. }, Some(r), DetectorResolution::Bound) => {
            let window_ns = detector.window_s * bucket_ns;
            bounds::at_resolution(entry_end_s * bucket_ns, r, window_ns, bucket_ns).then_some(r)
        }
        _ => None,
    };
    Some((detection, bounded_by))
}

/// The baseline's scheduled requests per bucket that size the dev widening (A2): from its
/// observed count (`baseline`: requests, whole buckets) under v0.3, from the configured rate under
/// v0.4 (A3), so that every run of one configuration is widened alike.
fn per_bucket(
    run: &Run,
    rules: &SpecRules,
    baseline: Option<(u64, u64)>,
    bucket_ns: u64,
) -> Option<f64> {
    match rules.widening {
        WideningRate::ObservedCount => baseline
            .filter(|&(_, buckets)| buckets > 0)
            .map(|(n, buckets)| n as f64 / buckets as f64),
        WideningRate::ConfiguredRate => Some(run.config.rate_rps() * seconds(bucket_ns)),
    }
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
    spec_rules: &SpecRules,
    valid: bool,
) -> Option<RecoveryReport> {
    if !valid && spec_rules.recovery == RecoveryRules::Original {
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
    let edge = |b: u64| match spec_rules.recovery {
        RecoveryRules::Amended => seconds(b * bucket_ns),
        RecoveryRules::Original => b as f64 * bucket_s,
    };
    let timeout_s = seconds(timeout_ns);
    let decomposition = decomposition(run, anchor_ns, spec_rules.words);
    let rules = match spec_rules.recovery {
        RecoveryRules::Amended => {
            let scheduled = base
                .as_ref()
                .map(|(w, rows, _)| (rows.len() as u64, (w.end_ns - w.start_ns) / bucket_ns));
            let rate = per_bucket(run, spec_rules, scheduled, bucket_ns);
            RecoveryReading {
                amended: Some(amended::plan(
                    run,
                    rate,
                    (bucket_ns, spec_rules.absence),
                    &decomposition,
                )),
            }
        }
        RecoveryRules::Original => RecoveryReading::original(),
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
    let (equilibrium, mut to_equilibrium) = Reading {
        series: &series,
        anchor,
        anchor_ns,
        bucket_ns,
        timeout_s,
        rules: &rules,
        amended: spec_rules.recovery == RecoveryRules::Amended,
    }
    .equilibrium(plateau, detector, &edge);
    let mut to_pre_fault = ttr(pre, bucket_ns, anchor_ns, timeout_s);

    // The sweep: each cell's own detector, plateau and equilibrium.
    let (sweep, sweep_note) = Cells {
        series: &series,
        anchor,
        anchor_ns,
        bucket_ns,
        timeout_buckets,
        timeout_s,
        baseline: baseline_goodput,
        reading: &rules,
        rules: spec_rules,
    }
    .sweep();

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

    let removal_ns = rules.amended.as_ref().and_then(|p| p.removal_ns);
    let deadline_ns = anchor_ns + timeout_ns;
    if spec_rules.claims == Claims::Supported
        && let Some(removal) = removal_ns.filter(|&r| r > deadline_ns)
    {
        to_pre_fault = residual_failure(removal, deadline_ns);
    }
    let mut components = components(
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
        (&rules, spec_rules.streams),
        parts::NotBefore {
            claims: spec_rules.claims,
            removal_ns,
            drain: spec_rules.drain,
        },
    );
    let (mut timeline_states, mut durations, experiment_invalid) = match &rules.amended {
        None => injection_timeline(run, timeline, fault, &to_pre_fault, gates),
        Some(plan) => timeline::ordered(
            run,
            timeline,
            fault,
            &to_pre_fault,
            gates,
            plan,
            (valid, spec_rules.claims, spec_rules.words),
        ),
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
        flags.report(valid, fidelity::table(run, plan))
    });
    if spec_rules.resolution == DetectorResolution::Bound {
        let r_ns = detector.window_s * bucket_ns;
        if let Some(removal) = removal_ns {
            let b =
                |t: &mut Ttr| bounds::bound(t, removal, "the removal", anchor_ns, r_ns, bucket_ns);
            if b(&mut to_pre_fault) {
                bounds::durations(&mut timeline_states, &mut durations, &to_pre_fault);
            }
            for c in components
                .iter_mut()
                .filter(|c| c.component != parts::BACKLOG)
            {
                b(&mut c.ttr);
            }
        }
        bounds::bound(
            &mut to_equilibrium,
            anchor_ns,
            "the fire",
            anchor_ns,
            r_ns,
            bucket_ns,
        );
    }
    let survivor = match spec_rules.survivor {
        SurvivorSpan::FaultWindow => Vec::new(),
        SurvivorSpan::OutageThenRecovery => {
            let recovered = to_pre_fault.at_s.map(|s| (s * 1e9).round() as u64);
            let end = recovered.unwrap_or(deadline_ns).min(end_ns);
            survivor::spans(
                (requests, spec_rules.streams, spec_rules.span_ttft),
                met,
                anchor_ns,
                removal_ns,
                end,
            )
        }
    };

    let (label, node_loss_label) = labels(run, gates);
    let report = RecoveryReport {
        variant: config.fault.variant.name().into(),
        label,
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
        caveats: match spec_rules.recovery {
            RecoveryRules::Amended => CAVEATS_A2,
            RecoveryRules::Original => CAVEATS,
        }
        .to_vec(),
        relapse,
        deficit_goodput_s: deficit,
        sweep,
        sweep_note,
        components,
        decomposition: match spec_rules.claims {
            Claims::Supported => {
                let mut ordered = decomposition;
                parts::flag_out_of_order(&mut ordered);
                ordered
            }
            Claims::Unguarded => decomposition,
        },
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
        survivor,
        claims: spec_rules.claims,
    };
    let mut report = if valid {
        report
    } else {
        amended::withhold(report, spec_rules.claims)
    };
    if spec_rules.json_seconds == JsonSeconds::Nanosecond {
        bounds::to_the_nanosecond(&mut report);
    }
    Some(report)
}

/// What the reading is of, in words: the fault's label, and a black-hole's node-loss label
/// (representative only when G3 and G4 passed, §1).
fn labels(run: &Run, gates: &[Gate]) -> (String, Option<String>) {
    let config = &run.config;
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
    let label = match config.fault.variant {
        FaultVariant::BlackHole => format!("partition heal: the same replica returns when the partition expires, so it cannot take less than the {partition_s:.3} s partition; no claim about recovery from node loss"),
        FaultVariant::Degradation => format!(
            "recovery from a degradation ({}) that lasted the pinned {:.3} s: a governed scenario, not the §1 replica-loss experiment, so the single-replica equilibrium is only descriptive",
            config.fault.mock_mode.as_deref().unwrap_or("exec"),
            seconds(config.duration_ns(&pins::FAULT_DEGRADATION_S))
        ),
        _ => "recovery".into(),
    };
    (label, node_loss_label)
}

/// What a plateau reading needs of the analysis around it.
struct Reading<'a> {
    series: &'a [Bucket],
    anchor: usize,
    anchor_ns: u64,
    bucket_ns: u64,
    timeout_s: f64,
    rules: &'a RecoveryReading,
    /// Amendment A2's wording (v0.3 on).
    amended: bool,
}

impl Reading<'_> {
    /// The single-replica plateau as the report gives it, and the time to reach it: estimable,
    /// or not and why (§5). `edge` is a bucket edge in seconds.
    fn equilibrium(
        &self,
        plateau: Plateau,
        detector: Detector,
        edge: &dyn Fn(u64) -> f64,
    ) -> (PlateauReport, Ttr) {
        let Reading {
            series,
            anchor,
            anchor_ns,
            bucket_ns,
            timeout_s,
            rules,
            amended,
        } = *self;
        match plateau {
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
                match rules.equilibrium(series, anchor, to_s as usize, goodput, detector) {
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
                bound_s: None,
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
        }
    }
}

/// A3: the fault's removal came after the recovery deadline, so the run did not recover within
/// the timeout: ResidualFailure, with when each came.
fn residual_failure(removal_ns: u64, deadline_ns: u64) -> Ttr {
    Ttr {
        status: "residual failure".into(),
        ttr_s: None,
        at_s: None,
        text: format!(
            "ResidualFailure: the fault's removal was confirmed at {:.3} s, after the recovery deadline at {:.3} s (the fire anchor plus the recovery timeout), so nothing recovered within the timeout (A3)",
            seconds(removal_ns),
            seconds(deadline_ns)
        ),
        flags: Vec::new(),
        bound_s: None,
    }
}

/// What the 27-cell sweep reads (§5): the series, where the fault started, and the rules.
struct Cells<'a> {
    series: &'a [Bucket],
    anchor: usize,
    anchor_ns: u64,
    bucket_ns: u64,
    timeout_buckets: usize,
    timeout_s: f64,
    baseline: Option<f64>,
    reading: &'a RecoveryReading,
    rules: &'a SpecRules,
}

impl Cells<'_> {
    /// A3: a cell's TTR `t` (s after the fire) at its own detector's resolution after `start`
    /// (the removal, the fire) is a bound, not a value: (value, bound), one of them `None`.
    fn resolve(
        &self,
        cell: Detector,
        t: Option<f64>,
        start: Option<u64>,
    ) -> (Option<f64>, Option<f64>) {
        if self.rules.resolution != DetectorResolution::Bound {
            return (t, None);
        }
        let at = |t: f64| self.anchor_ns + (t * 1e9).round() as u64;
        let window_ns = cell.window_s * self.bucket_ns;
        let bound = t.zip(start).and_then(|(t, s)| {
            bounds::at_resolution(at(t), s, window_ns, self.bucket_ns).then_some(t)
        });
        (t.filter(|_| bound.is_none()), bound)
    }

    /// Each cell's own detector, plateau and equilibrium, and the sentence on their ordering.
    fn sweep(&self) -> (Vec<SweepRow>, String) {
        let (series, anchor, anchor_ns, bucket_ns) =
            (self.series, self.anchor, self.anchor_ns, self.bucket_ns);
        let rules = self.reading;
        let edge = |b: u64| match self.rules.recovery {
            RecoveryRules::Amended => seconds(b * bucket_ns),
            RecoveryRules::Original => b as f64 * seconds(bucket_ns),
        };
        let mut sweep = Vec::new();
        let mut orderings = Vec::new();
        for cell in Detector::sweep() {
            let cell = rules.cell(cell);
            let pre_cell = self.baseline.map_or(Detection::NoBaseline, |g| {
                rules.pre_fault(series, anchor, g, cell)
            });
            let plateau_cell = rules.plateau(
                series,
                anchor,
                self.timeout_buckets,
                pre_cell,
                cell.window_s as usize,
            );
            let eq_cell = match plateau_cell {
                Plateau::Estimable { goodput, to_s, .. } => {
                    ttr(
                        rules.equilibrium(series, anchor, to_s as usize, goodput, cell),
                        bucket_ns,
                        anchor_ns,
                        self.timeout_s,
                    )
                    .ttr_s
                }
                Plateau::NotEstimable { .. } => None,
            };
            let pre_s = ttr(pre_cell, bucket_ns, anchor_ns, self.timeout_s).ttr_s;
            let removal = rules.amended.as_ref().and_then(|p| p.removal_ns);
            let (pre_s, pre_bound) = self.resolve(cell, pre_s, removal);
            let (eq_cell, eq_bound) = self.resolve(cell, eq_cell, Some(anchor_ns));
            orderings.push(pre_s.zip(eq_cell).map(|(p, e)| p.total_cmp(&e)));
            sweep.push(SweepRow {
                entry_percent: (cell.entry * 100.0).round(),
                window_s: edge(cell.window_s),
                hold_s: edge(cell.hold_s),
                to_pre_fault_s: pre_s,
                to_equilibrium_s: eq_cell,
                pre_fault_bound_s: pre_bound,
                equilibrium_bound_s: eq_bound,
            });
        }
        let stable = orderings.windows(2).all(|w| w[0] == w[1]);
        let note = match self.rules.claims {
            Claims::Supported => sweep_claim(&orderings),
            Claims::Unguarded if stable => {
                "every cell orders the two recovery times the same way".into()
            }
            Claims::Unguarded => "the ordering of the two recovery times changes across the sweep: no ordering claim is made (§5)".into(),
        };
        (sweep, note)
    }
}

/// A3's sweep sentence: an ordering claim only over the cells that measured both recovery times,
/// and none when no cell did.
fn sweep_claim(orderings: &[Option<std::cmp::Ordering>]) -> String {
    let measured: Vec<std::cmp::Ordering> = orderings.iter().flatten().copied().collect();
    let cells = orderings.len();
    if measured.is_empty() {
        return format!(
            "no cell of the {cells} measured both recovery times (a bound is not a measurement): no ordering claim is made (A3)"
        );
    }
    let rest = cells - measured.len();
    if measured.windows(2).all(|w| w[0] == w[1]) {
        format!(
            "the {} cells that measured both recovery times order them the same way; {rest} of {cells} measured one or neither, and are not part of the claim (A3)",
            measured.len()
        )
    } else {
        format!(
            "the ordering of the two recovery times changes across the {} cells that measured both: no ordering claim is made (§5, A3)",
            measured.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Boundary;
    use std::cmp::Ordering::{Greater, Less};

    /// A3's sweep sentence over hand-made cells: no claim over none, a claim over the measured
    /// ones with the count of the rest, none where they disagree.
    #[test]
    fn the_sweep_claims_only_over_cells_that_measured_both_times() {
        let none = sweep_claim(&[None; 27]);
        assert!(
            none.starts_with("no cell of the 27 measured both"),
            "{none}"
        );
        let mut cells = [None; 27];
        cells[3] = Some(Greater);
        cells[7] = Some(Greater);
        let two = sweep_claim(&cells);
        assert!(
            two.starts_with(
                "the 2 cells that measured both recovery times order them the same way; 25 of 27"
            ),
            "{two}"
        );
        cells[9] = Some(Less);
        assert!(sweep_claim(&cells)
            .starts_with("the ordering of the two recovery times changes across the 3 cells"));
    }

    /// Hand-made: reschedule at 1 s, weight load at 12.560 s, replica-ready at 12.523 s (listed
    /// after the weight load): replica-ready is flagged, 0.037 s before it; a later boundary is
    /// compared with the weight load, the last one in order.
    #[test]
    fn a_boundary_observed_before_the_one_listed_before_it_bounds_no_segment() {
        let at = |name: &'static str, ns: Option<u64>| Boundary {
            at_ns: ns,
            boundary: name,
            at_s: ns.map(seconds),
            since_anchor_s: ns.map(seconds),
            evidence: "seen".into(),
            out_of_order: false,
        };
        let mut b = vec![
            at("reschedule", Some(1_000_000_000)),
            at("weight load", Some(12_560_000_000)),
            at("CUDA-graph capture", None),
            at("replica-ready", Some(12_523_000_000)),
            at("traffic-restored", Some(12_600_000_000)),
        ];
        parts::flag_out_of_order(&mut b);
        let flagged: Vec<&str> = b
            .iter()
            .filter(|b| b.out_of_order)
            .map(|b| b.boundary)
            .collect();
        assert_eq!(flagged, ["replica-ready"]);
        assert!(
            b[3].evidence
                .contains("observed 0.037 s before weight load"),
            "{}",
            b[3].evidence
        );
    }

    #[test]
    fn a_removal_after_the_deadline_reads_as_residual_failure() {
        let r = residual_failure(97_000_000_000, 96_000_000_000);
        assert_eq!(r.status, "residual failure");
        assert!(r.text.starts_with("ResidualFailure: the fault's removal was confirmed at 97.000 s, after the recovery deadline at 96.000 s"));
        assert_eq!((r.ttr_s, r.bound_s), (None, None));
    }
}
