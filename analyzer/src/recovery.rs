//! The recovery report of a fault run (SPEC §5, seeds/004): the goodput series, time to recovery
//! against both baselines, the plateau, the 27-cell sweep, the integrated deficit, per-component
//! recovery, the measured decomposition, and the failure-injection timeline.
//!
//! Every duration is in seconds of the run (dev runs are time-compressed, and say so elsewhere).
//! The detector works in buckets: the pinned R, H and bucket are all dev-scaled by the same
//! factor, so R = 10 buckets and H = 30 buckets in every profile.

use percentes_formats::config::FaultVariant;
use percentes_formats::journal::records::EventKind;
use percentes_formats::journal::records::{Outcome, SealStatus};
use percentes_formats::pins;

use crate::estimate::recovery::{self, Bucket, Detection, Detector, Plateau};
use crate::frame::{Requests, NONE};
use crate::load::Run;
use crate::model::*;
use crate::windows::{Kind, Timeline, Window};

/// The caveats that travel with every TTR (§5).
pub const CAVEATS: [&str; 2] = [
    "the plateau is a measured operating point held by the offered load and the timeout shedding work, not a queueing-theory steady state",
    "the plateau window ends at this run's recovery to the pre-fault baseline, so the equilibrium is not independent of that detection",
];

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A per-bucket series of "good" shares: `good(row)` decides each scheduled request.
fn series_of(
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

fn ttr(detection: Detection, bucket_ns: u64, anchor_ns: u64, timeout_s: f64) -> Ttr {
    match detection {
        Detection::Recovered { entry_end_s, .. } => {
            let at = entry_end_s * bucket_ns;
            let value = seconds(at.saturating_sub(anchor_ns));
            Ttr {
                status: "recovered".into(),
                ttr_s: Some(value),
                at_s: Some(seconds(at)),
                text: format!("{value:.3} s"),
            }
        }
        Detection::NotRecovered => Ttr {
            status: "not recovered within the recovery timeout".into(),
            ttr_s: None,
            at_s: None,
            text: format!("not recovered within {timeout_s:.3} s"),
        },
        Detection::NoBaseline => Ttr {
            status: "no baseline".into(),
            ttr_s: None,
            at_s: None,
            text: "no baseline goodput to recover to".into(),
        },
    }
}

fn not_applicable(why: &str) -> Ttr {
    Ttr {
        status: "N/A".into(),
        ttr_s: None,
        at_s: None,
        text: format!("N/A: {why}"),
    }
}

/// Runs the §5 analysis. `met` is the SLO verdict per row; `timeline` and `cut` as analyzed.
pub fn analyze(
    run: &Run,
    met: &[bool],
    timeline: &Timeline,
    cut: &[Window],
    gates: &[Gate],
) -> Option<RecoveryReport> {
    let fault = timeline.fault?;
    let config = &run.config;
    let requests = &run.requests;
    let bucket_ns = config.duration_ns(&pins::RECOVERY_BUCKET_S).max(1);
    let detector = Detector::pinned();
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
    let timeout_s = seconds(timeout_ns);

    let detect = |series: &[Bucket], baseline: Option<f64>, detector: Detector| {
        baseline.map_or(Detection::NoBaseline, |g| {
            recovery::detect(series, anchor, g, detector)
        })
    };
    let pre = detect(&series, baseline_goodput, detector);
    let plateau = recovery::plateau(
        &series,
        anchor,
        timeout_buckets,
        pre,
        detector.window_s as usize,
    );
    let (equilibrium, to_equilibrium) = match plateau {
        Plateau::Estimable {
            from_s,
            to_s,
            goodput,
        } => (
            PlateauReport {
                estimable: true,
                from_s: from_s as f64 * bucket_s,
                to_s: to_s as f64 * bucket_s,
                goodput: Some(goodput),
                note: "estimable: spans at least R with goodput above 0".into(),
            },
            ttr(
                detect(&series, Some(goodput), detector),
                bucket_ns,
                anchor_ns,
                timeout_s,
            ),
        ),
        Plateau::NotEstimable {
            from_s,
            to_s,
            reason,
        } => (
            PlateauReport {
                estimable: false,
                from_s: from_s as f64 * bucket_s,
                to_s: to_s as f64 * bucket_s,
                goodput: None,
                note: format!("not estimable: {reason}"),
            },
            not_applicable(&format!(
                "the single-replica equilibrium is not estimable ({reason})"
            )),
        ),
    };
    let to_pre_fault = ttr(pre, bucket_ns, anchor_ns, timeout_s);

    // The sweep: each cell's own detector, plateau and equilibrium.
    let mut sweep = Vec::new();
    let mut orderings = Vec::new();
    for cell in Detector::sweep() {
        let pre_cell = detect(&series, baseline_goodput, cell);
        let plateau_cell = recovery::plateau(
            &series,
            anchor,
            timeout_buckets,
            pre_cell,
            cell.window_s as usize,
        );
        let eq_cell = match plateau_cell {
            Plateau::Estimable { goodput, .. } => {
                ttr(
                    detect(&series, Some(goodput), cell),
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
            window_s: cell.window_s as f64 * bucket_s,
            hold_s: cell.hold_s as f64 * bucket_s,
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
    let relapse = match (pre, baseline_goodput) {
        (Detection::Recovered { entry_end_s, .. }, Some(g)) => recovery::relapse(
            &series,
            entry_end_s as usize,
            anchor + timeout_buckets,
            g,
            detector,
        )
        .map(|t| {
            format!(
                "goodput fell below the exit threshold ({:.0} % of the pre-fault baseline) again in the window ending {:.3} s after the fire, after this recovery had held for H: the recovery did not last. A degradation that builds slowly (a survivor's queue filling) can pass the hold first; this TTR understates the disruption, so read the goodput timeline and the sweep beside it",
                detector.exit * 100.0,
                (t + 1) as f64 * bucket_s - seconds(anchor_ns)
            )
        }),
        _ => None,
    };
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
    );
    let decomposition = decomposition(run, anchor_ns);
    let (timeline_states, durations, experiment_invalid) =
        injection_timeline(run, timeline, &to_pre_fault, gates);

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
    Some(RecoveryReport {
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
        window_s: detector.window_s as f64 * bucket_s,
        hold_s: detector.hold_s as f64 * bucket_s,
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
        caveats: CAVEATS.to_vec(),
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
                t_s: i as f64 * bucket_s,
                goodput: (b.scheduled > 0).then(|| b.met as f64 / b.scheduled as f64),
                scheduled: b.scheduled,
            })
            .collect(),
    })
}

#[allow(clippy::too_many_arguments)]
fn components(
    run: &Run,
    met: &[bool],
    bucket_ns: u64,
    end_ns: u64,
    anchor: usize,
    anchor_ns: u64,
    baseline_rows: &[usize],
    baseline_window: Option<Window>,
    timeout_s: f64,
    detector: Detector,
) -> Vec<Component> {
    let requests = &run.requests;
    let slo = crate::estimate::slo::Slo::pinned();
    let completed = |r: usize| requests.outcome(r) == Some(Outcome::Completed);
    let first = |r: usize| {
        let f = requests.first_content_ns[r];
        if f == NONE {
            requests.terminal_ns[r]
        } else {
            f
        }
    };
    let ttft_ok =
        |r: usize| completed(r) && first(r).saturating_sub(requests.intended_ns[r]) <= slo.ttft_ns;
    let e2e_ok = |r: usize| {
        completed(r)
            && requests.terminal_ns[r].saturating_sub(requests.intended_ns[r]) <= slo.e2e_ns
    };
    let not_errored = |r: usize| requests.outcome(r) != Some(Outcome::Errored);
    let _ = met;
    let mut out = Vec::new();
    let checks: [(&'static str, &dyn Fn(usize) -> bool); 3] = [
        ("TTFT-SLO share", &ttft_ok),
        ("end-to-end-SLO share", &e2e_ok),
        ("share not errored (error rate)", &not_errored),
    ];
    for (name, good) in checks {
        let series = series_of(requests, bucket_ns, end_ns, good);
        let baseline = (!baseline_rows.is_empty()).then(|| {
            baseline_rows.iter().filter(|&&r| good(r)).count() as f64 / baseline_rows.len() as f64
        });
        let detection = baseline.map_or(Detection::NoBaseline, |g| {
            recovery::detect(&series, anchor, g, detector)
        });
        out.push(Component {
            component: name,
            baseline,
            ttr: ttr(detection, bucket_ns, anchor_ns, timeout_s),
        });
    }
    out.push(backlog(
        run,
        bucket_ns,
        end_ns,
        anchor,
        anchor_ns,
        baseline_window,
        timeout_s,
        detector,
    ));
    out
}

/// Backlog drain: requests in flight (dispatched, not yet terminal) sampled at each bucket start.
/// A backlog exists when the count after the anchor exceeds the baseline's largest; it has
/// drained at the first sample after the peak back at or under that level that stays there for
/// the hold H.
#[allow(clippy::too_many_arguments)]
fn backlog(
    run: &Run,
    bucket_ns: u64,
    end_ns: u64,
    anchor: usize,
    anchor_ns: u64,
    baseline: Option<Window>,
    timeout_s: f64,
    detector: Detector,
) -> Component {
    let requests = &run.requests;
    let buckets = usize::try_from(end_ns / bucket_ns).unwrap_or(0);
    let mut delta = vec![0i64; buckets + 1];
    for r in 0..requests.len() {
        let d = requests.dispatched_ns[r];
        if d == NONE || requests.outcome(r).is_none() {
            continue;
        }
        // In flight at bucket start b*bucket iff d <= b*bucket < terminal.
        let from = d.div_ceil(bucket_ns) as usize;
        let to = requests.terminal_ns[r].div_ceil(bucket_ns) as usize;
        if from < to && from <= buckets {
            delta[from] += 1;
            delta[to.min(buckets)] -= 1;
        }
    }
    let mut in_flight = Vec::with_capacity(buckets);
    let mut level = 0i64;
    for d in delta.iter().take(buckets) {
        level += d;
        in_flight.push(level.max(0) as u64);
    }
    let base_max = baseline.map(|w| {
        let from = w.start_ns.div_ceil(bucket_ns) as usize;
        let to = (w.end_ns / bucket_ns) as usize;
        in_flight
            .get(from..to.min(in_flight.len()))
            .and_then(|s| s.iter().max().copied())
            .unwrap_or(0)
    });
    let Some(base_max) = base_max else {
        return Component {
            component: "backlog drain",
            baseline: None,
            ttr: not_applicable("no baseline window"),
        };
    };
    let after = in_flight.get(anchor..).unwrap_or(&[]);
    let (peak_at, peak) = after
        .iter()
        .enumerate()
        .max_by_key(|(i, v)| (**v, std::cmp::Reverse(*i)))
        .map(|(i, v)| (i, *v))
        .unwrap_or((0, 0));
    let baseline_value = Some(base_max as f64);
    if peak <= base_max {
        return Component {
            component: "backlog drain",
            baseline: baseline_value,
            ttr: not_applicable(&format!(
                "no backlog formed (in flight never exceeded the baseline's largest, {base_max})"
            )),
        };
    }
    let hold = detector.hold_s as usize;
    let drained = (peak_at..after.len())
        .find(|&i| i + hold < after.len() && after[i..=i + hold].iter().all(|&v| v <= base_max));
    Component {
        component: "backlog drain",
        baseline: baseline_value,
        ttr: match drained {
            Some(i) => {
                let at = (anchor + i) as u64 * bucket_ns;
                let value = seconds(at.saturating_sub(anchor_ns));
                Ttr { status: "recovered".into(), ttr_s: Some(value), at_s: Some(seconds(at)), text: format!("{value:.3} s (peak {peak} in flight)") }
            }
            None => Ttr {
                status: "not recovered within the recovery timeout".into(),
                ttr_s: None,
                at_s: None,
                text: format!("backlog not drained within {timeout_s:.3} s (peak {peak} in flight, baseline at most {base_max})"),
            },
        },
    }
}

/// Measured boundaries only (§5): timeline events the journal carries, the first direct probe
/// success against the victim, the first success through the service served by it.
fn decomposition(run: &Run, anchor_ns: u64) -> Vec<Boundary> {
    let mut out = Vec::new();
    let boundary = |name: &'static str, at: Option<u64>, evidence: String| Boundary {
        boundary: name,
        at_s: at.map(seconds),
        since_anchor_s: at.map(|a| (a as f64 - anchor_ns as f64) / 1e9),
        evidence,
    };
    for (name, subject) in [
        ("reschedule", "reschedule"),
        ("container start", "container-start"),
        ("weight load", "weight-load"),
        ("CUDA-graph capture", "graph-capture"),
    ] {
        let event = run
            .events
            .all(EventKind::Timeline)
            .find(|e| e.subject == subject && e.at_ns >= anchor_ns);
        out.push(match event {
            Some(e) => boundary(
                name,
                Some(e.at_ns),
                format!("timeline event `{subject}`: {}", e.detail),
            ),
            None => boundary(
                name,
                None,
                format!("N/A: the journal carries no `{subject}` timeline event (never inferred)"),
            ),
        });
    }
    let victim = run.config.fault.victim.clone().unwrap_or_default();
    let probes: Vec<_> = run
        .events
        .all(EventKind::Probe)
        .filter(|e| e.subject == victim)
        .collect();
    let went_down = probes
        .iter()
        .find(|e| e.at_ns >= anchor_ns && e.detail.starts_with("down"))
        .map(|e| e.at_ns);
    let ready =
        went_down.and_then(|down| probes.iter().find(|e| e.at_ns > down && e.detail == "ok"));
    out.push(match (probes.is_empty(), went_down, ready) {
        (true, _, _) => boundary(
            "replica-ready",
            None,
            format!("N/A: no direct probe of {victim} in the journal"),
        ),
        (false, None, _) => boundary(
            "replica-ready",
            None,
            format!("N/A: {victim} never stopped answering its direct probe"),
        ),
        (false, Some(_), None) => boundary(
            "replica-ready",
            None,
            format!("N/A: {victim} did not answer its direct probe again before the run ended"),
        ),
        (false, Some(_), Some(e)) => boundary(
            "replica-ready",
            Some(e.at_ns),
            format!("first direct probe success against {victim} after it went down"),
        ),
    });
    let requests = &run.requests;
    let restored = (0..requests.len())
        .filter(|&r| {
            requests.outcome(r) == Some(Outcome::Completed) && requests.terminal_ns[r] > anchor_ns
        })
        .filter(|&r| {
            requests.replica_name(r) == Some(victim.as_str())
                && requests.dispatched_ns[r] > anchor_ns
        })
        .map(|r| requests.terminal_ns[r])
        .min();
    out.push(match restored {
        Some(at) => boundary(
            "traffic-restored",
            Some(at),
            format!("first success through the service served by {victim} after the fire"),
        ),
        None => boundary(
            "traffic-restored",
            None,
            format!("N/A: no success through the service was served by {victim} after the fire"),
        ),
    });
    out
}

/// The failure-injection timeline (seeds/004): states, the three durations, and the abort
/// conditions that make the experiment invalid.
fn injection_timeline(
    run: &Run,
    timeline: &Timeline,
    pre: &Ttr,
    gates: &[Gate],
) -> (Vec<State>, Vec<Duration>, Vec<String>) {
    let fault = timeline.fault.expect("a fault run");
    let events = &run.events;
    let at = |kind: EventKind| events.first(kind).map(|e| e.at_ns);
    let fired = at(EventKind::FaultFired);
    let confirmed = at(EventKind::FaultConfirmed);
    let removed = at(EventKind::FaultRemoved).or_else(|| at(EventKind::FaultExpired));
    let black_hole = run.config.fault.variant == FaultVariant::BlackHole;
    let baseline_ok = gates
        .iter()
        .find(|g| g.id == GateId::BaselineGoodput)
        .map(|g| g.status);
    let recovered_at = pre.at_s;
    let mut states = vec![State {
        state: "Stabilizing",
        from_s: Some(0.0),
        evidence: "the run's start; warm-up is discarded".into(),
    }];
    states.push(State {
        state: "Healthy",
        from_s: (baseline_ok == Some(Status::Pass)).then(|| seconds(timeline.warmup_end_ns)),
        evidence: match baseline_ok {
            Some(Status::Pass) => "the baseline passed G6".into(),
            Some(status) => format!("not reached: the baseline's G6 is {status}"),
            None => "not reached: no G6 reading".into(),
        },
    });
    states.push(State {
        state: "Injecting",
        from_s: fired.map(seconds),
        evidence: fired.map_or("not reached: no fault-fired event".into(), |_| {
            "fault-fired event (the control began)".into()
        }),
    });
    states.push(State {
        state: "Faulted",
        from_s: confirmed.map(seconds),
        evidence: confirmed.map_or(
            "not observed: no independent confirmation of the impact (fault-confirmed)".into(),
            |_| "fault-confirmed event (independent confirmation)".into(),
        ),
    });
    if black_hole {
        states.push(State {
            state: "Removing",
            from_s: Some(seconds(
                fault.inject_ns + run.config.duration_ns(&pins::FAULT_PARTITION_S),
            )),
            evidence: "the pinned partition's duration completed".into(),
        });
        states.push(State {
            state: "Recovering",
            from_s: removed.map(seconds),
            evidence: removed.map_or(
                "not observed: no fault-removed or fault-expired event".into(),
                |_| "removal recorded (fault-removed or fault-expired)".into(),
            ),
        });
    } else {
        states.push(State {
            state: "Recovering",
            from_s: confirmed.or(fired).map(seconds),
            evidence: "clean delete removes nothing: recovery (replacement) starts with the impact"
                .into(),
        });
    }
    match recovered_at {
        Some(t) => states.push(State {
            state: "Recovered",
            from_s: Some(t),
            evidence: "recovery to the pre-fault baseline held for H (§5)".into(),
        }),
        None => states.push(State {
            state: "ResidualFailure",
            from_s: Some(seconds(timeline.measured_end_ns)),
            evidence: format!("{} by the recovery deadline", pre.text),
        }),
    }
    let impact = confirmed.or(fired);
    let detection = events
        .all(EventKind::Timeline)
        .find(|e| e.subject == "detected" && impact.is_some_and(|i| e.at_ns >= i))
        .map(|e| e.at_ns);
    let durations = vec![
        Duration {
            duration: "detection",
            seconds: detection.zip(confirmed).map(|(d, c)| seconds(d - c)),
            definition: "confirmed impact to the service's first detection signal (metric, event, health or breaker transition)",
            note: if confirmed.is_none() {
                "N/A: the impact was not independently confirmed".into()
            } else if detection.is_none() {
                "N/A: the journal carries no `detected` timeline event".into()
            } else {
                String::new()
            },
        },
        Duration {
            duration: "degradation",
            seconds: confirmed.zip(recovered_at).map(|(c, r)| r - seconds(c)),
            definition: "confirmed impact to restored user behaviour (recovery to the pre-fault baseline)",
            note: if confirmed.is_none() {
                "N/A: the impact was not independently confirmed".into()
            } else if recovered_at.is_none() {
                format!("N/A: {}", pre.text)
            } else {
                String::new()
            },
        },
        Duration {
            duration: "recovery",
            seconds: if black_hole { removed.zip(recovered_at).map(|(m, r)| r - seconds(m)) } else { None },
            definition: "confirmed removal to stable invariants",
            note: if !black_hole {
                "N/A: clean delete removes nothing; its recovery is the degradation above".into()
            } else if removed.is_none() {
                "N/A: the removal was not recorded".into()
            } else if recovered_at.is_none() {
                format!("N/A: {}", pre.text)
            } else {
                String::new()
            },
        },
    ];
    let mut invalid = Vec::new();
    for e in events.all(EventKind::FaultFailed) {
        invalid.push(format!(
            "the fault plan failed at {:.3} s: {}",
            seconds(e.at_ns),
            e.detail
        ));
    }
    if fired.is_none() {
        invalid.push("the fault never fired".into());
    }
    if run.config.fault.confirm_address.is_some() && confirmed.is_none() {
        invalid.push("the impact was never independently confirmed".into());
    }
    if let Some(seal) = &run.report.seal {
        if seal.status != SealStatus::Completed.name() {
            invalid.push(format!("the run was {} ({})", seal.status, seal.reason));
        }
    }
    (states, durations, invalid)
}
