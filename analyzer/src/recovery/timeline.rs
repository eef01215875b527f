//! The failure-injection timeline (seeds/004; SPEC §10): states, the three durations, and the
//! abort conditions that make an experiment invalid.

use percentes_formats::config::FaultVariant;
use percentes_formats::journal::records::{EventKind, SealStatus, TimelineSubject};
use percentes_formats::pins;
use percentes_formats::spec::{Claims, ReadingWords};

use super::amended::Plan;
use super::seconds;
use crate::load::Run;
use crate::model::{Duration, Gate, GateId, State, Status, Ttr};
use crate::windows::{FaultTimes, Timeline};

/// The failure-injection timeline (seeds/004): states, the three durations, and the abort
/// conditions that make the experiment invalid.
pub(super) fn injection_timeline(
    run: &Run,
    timeline: &Timeline,
    fault: FaultTimes,
    pre: &Ttr,
    gates: &[Gate],
) -> (Vec<State>, Vec<Duration>, Vec<String>) {
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
        .find(|e| {
            e.subject == TimelineSubject::Detected.name() && impact.is_some_and(|i| e.at_ns >= i)
        })
        .map(|e| e.at_ns);
    let durations = vec![
        detection_duration(
            detection.zip(confirmed).map(|(d, c)| seconds(d - c)),
            confirmed,
            detection,
        ),
        Duration {
            duration: "degradation",
            seconds: confirmed.zip(recovered_at).map(|(c, r)| r - seconds(c)),
            definition:
                "confirmed impact to restored user behaviour (recovery to the pre-fault baseline)",
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
            seconds: if black_hole {
                removed.zip(recovered_at).map(|(m, r)| r - seconds(m))
            } else {
                None
            },
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
    let invalid = abort_conditions(run, fired, confirmed);
    (states, durations, invalid)
}

/// The abort conditions that make the experiment invalid rather than a product failure.
fn abort_conditions(run: &Run, fired: Option<u64>, confirmed: Option<u64>) -> Vec<String> {
    let mut invalid = Vec::new();
    for e in run.events.all(EventKind::FaultFailed) {
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
    if let Some(seal) = &run.report.seal
        && seal.status != SealStatus::Completed.name()
    {
        invalid.push(format!("the run was {} ({})", seal.status, seal.reason));
    }
    invalid
}

/// A2's timeline (v0.3): the seven states in seeds/004's order, each from its evidence, with the
/// times non-decreasing by construction (a state whose evidence precedes the state before it is
/// held at that state's time and says so); detection, degradation and recovery measured for every
/// variant from its own confirmed removal, never negative; an invalid run's recovery withheld.
pub(super) fn ordered(
    run: &Run,
    timeline: &Timeline,
    fault: FaultTimes,
    pre: &Ttr,
    gates: &[Gate],
    plan: &Plan,
    (valid, claims, words): (bool, Claims, ReadingWords),
) -> (Vec<State>, Vec<Duration>, Vec<String>) {
    // Under A3 a state that was not read is named so, not as the two it could have been.
    let unread = match claims {
        Claims::Supported => "not determined",
        Claims::Unguarded => "Recovered or ResidualFailure",
    };
    let config = &run.config;
    let events = &run.events;
    let at = |kind: EventKind| events.first(kind).map(|e| e.at_ns);
    let fired = at(EventKind::FaultFired);
    let confirmed = at(EventKind::FaultConfirmed);
    let impact = confirmed.or(fired);
    let baseline_ok = gates
        .iter()
        .find(|g| g.id == GateId::BaselineGoodput)
        .map(|g| g.status);
    let mut raw: Vec<(&'static str, Option<u64>, String)> = vec![
        (
            "Stabilizing",
            Some(0),
            "the run's start; warm-up is discarded".into(),
        ),
        (
            "Healthy",
            (baseline_ok == Some(Status::Pass)).then_some(timeline.warmup_end_ns),
            match baseline_ok {
                Some(Status::Pass) => "the baseline passed G6".into(),
                Some(status) => format!("not reached: the baseline's G6 is {status}"),
                None => "not reached: no G6 reading".into(),
            },
        ),
        (
            "Injecting",
            fired,
            fired.map_or("not reached: no fault-fired event".into(), |_| {
                "fault-fired event (the control began)".into()
            }),
        ),
        (
            "Faulted",
            confirmed,
            confirmed.map_or(
                "not observed: no independent confirmation of the impact (fault-confirmed)".into(),
                |_| "fault-confirmed event (independent confirmation)".into(),
            ),
        ),
    ];
    let duration_pin = match config.fault.variant {
        FaultVariant::BlackHole => Some(&pins::FAULT_PARTITION_S),
        FaultVariant::Degradation => Some(&pins::FAULT_DEGRADATION_S),
        _ => None,
    };
    let expired = events
        .all(EventKind::FaultExpired)
        .find(|e| fired.is_some_and(|f| e.at_ns >= f))
        .map(|e| e.at_ns);
    let removing = match (duration_pin, expired) {
        (Some(pin), Some(at)) => (
            Some(at),
            format!(
                "the armed expiry, as journaled (fault-expired), after the pinned {:.3} s ({})",
                seconds(config.duration_ns(pin)),
                pin.key
            ),
        ),
        (Some(pin), None) => {
            let start = fired.unwrap_or(fault.inject_ns);
            (
                Some(start + config.duration_ns(pin)),
                format!(
                    "the pinned {:.3} s duration completed ({} from the fire; no fault-expired event)",
                    seconds(config.duration_ns(pin)),
                    pin.key
                ),
            )
        }
        (None, _) => {
            // A4 (issue 52): the orchestrator may act a few ms before the fault's impact is
            // confirmed; its reschedule is read from the fire on (and held at the confirmation
            // below), not missed.
            let from = match words {
                ReadingWords::Archived => impact,
                ReadingWords::WhatWasMeasured => fired.or(impact),
            };
            let reschedule = events
                .all(EventKind::Timeline)
                .find(|e| {
                    e.subject == TimelineSubject::Reschedule.name()
                        && from.is_some_and(|i| e.at_ns >= i)
                })
                .map(|e| e.at_ns);
            match reschedule {
                Some(r) => (Some(r), "a deletion is not undone: the orchestrator's replacement is its removal, from the `reschedule` timeline event".into()),
                None => (impact, "a deletion is not undone: the orchestrator's replacement is its removal, from the impact (no `reschedule` timeline event)".into()),
            }
        }
    };
    raw.push(("Removing", removing.0, removing.1));
    raw.push((
        "Recovering",
        plan.removal_ns,
        format!("removal confirmed: {}", plan.removal_evidence),
    ));
    let deadline_ns = (fault.anchor_ns()
        + config.duration_ns(&pins::EXPERIMENT_RECOVERY_TIMEOUT_S))
    .min(timeline.measured_end_ns);
    let recovered_ns = pre.at_s.map(|s| (s * 1e9).round() as u64);
    if !valid {
        raw.push((unread, None, "withheld: the run is invalid (§9)".into()));
    } else if pre.status == "not determined" {
        raw.push((unread, None, pre.text.clone()));
    } else if pre.status == "residual failure" {
        raw.push(("ResidualFailure", Some(deadline_ns), pre.text.clone()));
    } else if let Some(r) = recovered_ns {
        raw.push((
            "Recovered",
            Some(r),
            "recovery to the pre-fault baseline held for H, after the removal (§5, A2)".into(),
        ));
    } else {
        raw.push((
            "ResidualFailure",
            Some(deadline_ns),
            format!("{} by the recovery deadline", pre.text),
        ));
    }
    let mut states = Vec::with_capacity(raw.len());
    let mut floor = 0u64;
    for (state, at_ns, mut evidence) in raw {
        let from_ns = at_ns.map(|t| {
            if t < floor {
                evidence.push_str(&format!(
                    "; its evidence came {:.3} ms before the state before, so it is held at that state's time to keep the timeline ordered",
                    (floor - t) as f64 / 1e6
                ));
            }
            t.max(floor)
        });
        if let Some(t) = from_ns {
            floor = t;
        }
        states.push(State {
            state,
            from_s: from_ns.map(seconds),
            evidence,
        });
    }
    let state_ns = |name: &str| {
        states
            .iter()
            .find(|s| s.state == name)
            .and_then(|s| s.from_s)
    };
    let (faulted, recovering, recovered) = (
        state_ns("Faulted"),
        state_ns("Recovering"),
        valid.then(|| state_ns("Recovered")).flatten(),
    );
    let detection = events
        .all(EventKind::Timeline)
        .find(|e| {
            e.subject == TimelineSubject::Detected.name() && confirmed.is_some_and(|c| e.at_ns >= c)
        })
        .map(|e| e.at_ns);
    let span = |from: Option<f64>, to: Option<f64>| from.zip(to).map(|(a, b)| (b - a).max(0.0));
    let withheld = "withheld: the run is invalid (§9)".to_owned();
    let not_recovered = |what: &str| -> String {
        if !valid {
            withheld.clone()
        } else if pre.at_s.is_none() {
            format!("N/A: {}", pre.text)
        } else {
            format!("N/A: {what}")
        }
    };
    let durations = vec![
        detection_duration(span(faulted, detection.map(seconds)), confirmed, detection),
        Duration {
            duration: "degradation",
            seconds: span(faulted, recovered),
            definition:
                "confirmed impact to restored user behaviour (recovery to the pre-fault baseline)",
            note: if confirmed.is_none() {
                "N/A: the impact was not independently confirmed".into()
            } else if recovered.is_none() {
                not_recovered("no recovery")
            } else {
                String::new()
            },
        },
        Duration {
            duration: "recovery",
            seconds: span(recovering, recovered),
            definition:
                "confirmed removal to stable invariants (recovery to the pre-fault baseline)",
            note: if recovering.is_none() {
                format!(
                    "N/A: the removal was not confirmed ({})",
                    plan.removal_evidence
                )
            } else if recovered.is_none() {
                not_recovered("no recovery")
            } else {
                String::new()
            },
        },
    ];
    (states, durations, abort_conditions(run, fired, confirmed))
}

/// Detection: confirmed impact to the service's first `detected` timeline event.
fn detection_duration(
    seconds: Option<f64>,
    confirmed: Option<u64>,
    detection: Option<u64>,
) -> Duration {
    Duration {
        duration: "detection",
        seconds,
        definition: "confirmed impact to the service's first detection signal (metric, event, health or breaker transition)",
        note: if confirmed.is_none() {
            "N/A: the impact was not independently confirmed".into()
        } else if detection.is_none() {
            "N/A: the journal carries no `detected` timeline event".into()
        } else {
            String::new()
        },
    }
}
