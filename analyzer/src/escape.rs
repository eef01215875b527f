//! Escaped experiments and the cleanup verdict (seeds/004, SPEC §10).
//!
//! An experiment escapes when one of its declared abort triggers fires (the recorder journals an
//! `escape` event, stops offered load and seals `escaped`). Its report keeps what incident
//! response needs, in the order seeds/004 lists it, and the containment gate fails the run: an
//! escaped experiment is invalid, not a finding about the service.
//!
//! Cleanup is part of every fault run's verdict: was the fault's removal confirmed, and did a
//! second healthy observation of the target follow it?

use percentes_formats::config::FaultVariant;
use percentes_formats::journal::detail::DetailWord;
use percentes_formats::journal::records::EventKind;
use percentes_formats::journal::records::{class_code, EventRecord, Outcome, RECORDER_ABORTS};

use crate::load::Run;
use crate::model::{CleanupReport, Effect, EscapeReport, Gate, GateId, Retained, Status};

/// Probes of the target that must answer `ok` after the removal for cleanup to be confirmed:
/// the observation that the fault ended, and a second that it stayed ended.
pub const HEALTHY_OBSERVATIONS: usize = 2;

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn event_line(e: &EventRecord) -> String {
    format!("{:.3} s: {}", seconds(e.at_ns), e.detail)
}

/// How the fault's end was recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Removal {
    /// A clean delete is not undone.
    NotApplicable,
    /// A removal command confirmed the fault's end.
    Confirmed,
    /// A removal command failed.
    Failed,
    /// The armed expiry ended the fault.
    Expired,
    /// Neither a removal nor an expiry is recorded.
    NotRecorded,
}

impl Removal {
    /// Its name in the report (`cleanup.removal`).
    fn name(self) -> &'static str {
        match self {
            Removal::NotApplicable => "not applicable",
            Removal::Confirmed => "confirmed",
            Removal::Failed => "failed",
            Removal::Expired => "expired",
            Removal::NotRecorded => "not recorded",
        }
    }
}

/// The cleanup verdict, for a fault run that fired.
pub fn cleanup(run: &Run) -> Option<CleanupReport> {
    let config = &run.config;
    let variant = config.fault.variant;
    if variant == FaultVariant::None {
        return None;
    }
    let fired = run.events.first(EventKind::FaultFired)?.at_ns;
    let target = config.fault.victim.as_deref().unwrap_or_default();
    let mut attempts: Vec<(u64, Removal, String)> = Vec::new();
    for (kind, what) in [
        (EventKind::FaultRemoved, Removal::Confirmed),
        (EventKind::FaultExpired, Removal::Expired),
    ] {
        for e in run.events.all(kind) {
            attempts.push((e.at_ns, what, event_line(e)));
        }
    }
    for e in run
        .events
        .all(EventKind::FaultFailed)
        .filter(|e| DetailWord::RemovalFailed.opens(&e.detail))
    {
        attempts.push((e.at_ns, Removal::Failed, event_line(e)));
    }
    attempts.sort_by_key(|a| a.0);
    // A confirmed removal counts before a failed one, and a failed one before an expiry.
    let (removal, removal_at) = if variant == FaultVariant::CleanDelete {
        (Removal::NotApplicable, None)
    } else {
        [Removal::Confirmed, Removal::Failed, Removal::Expired]
            .into_iter()
            .find_map(|r| attempts.iter().find(|a| a.1 == r).map(|a| (r, Some(a.0))))
            .unwrap_or((Removal::NotRecorded, None))
    };
    let since = removal_at.unwrap_or(fired);
    let healthy = run
        .events
        .all(EventKind::Probe)
        .filter(|e| e.subject == target && DetailWord::ProbeUp.opens(&e.detail) && e.at_ns >= since)
        .count();
    let probed = config.target.replica_addresses.contains_key(target);
    let removal_ok = matches!(
        removal,
        Removal::Confirmed | Removal::Expired | Removal::NotApplicable
    );
    let confirmed = removal_ok && healthy >= HEALTHY_OBSERVATIONS;
    let verdict = match (removal, confirmed) {
        (Removal::NotApplicable, true) => format!(
            "cleanup confirmed: a deletion is not undone; {target} answered healthy {healthy} times after the fire (its replacement)"
        ),
        (Removal::Expired, true) => format!(
            "cleanup confirmed by observation: the armed expiry ended the fault (no removal command confirmed it) and {target} answered healthy {healthy} times after"
        ),
        (_, true) => format!(
            "cleanup confirmed: removal confirmed at {:.3} s and {target} answered healthy {healthy} times after",
            seconds(since)
        ),
        (Removal::Failed, false) => "cleanup FAILED: the removal command did not confirm the fault's end".to_owned(),
        (Removal::NotRecorded, false) => {
            "cleanup NOT confirmed: no removal or expiry is recorded".to_owned()
        }
        (_, false) if !probed => format!(
            "cleanup NOT confirmed: {target} has no direct address (target.replica_addresses), so no healthy observation can follow the removal"
        ),
        (Removal::NotApplicable, false) => format!(
            "cleanup NOT confirmed: {target} answered healthy {healthy} times after the fire; {HEALTHY_OBSERVATIONS} are needed (its replacement serving, observed twice)"
        ),
        (_, false) => format!(
            "cleanup NOT confirmed: {target} answered healthy {healthy} times after the removal; {HEALTHY_OBSERVATIONS} are needed (the observation that the fault ended and a second that it stayed ended)"
        ),
    };
    Some(CleanupReport {
        removal: removal.name(),
        removal_at_s: removal_at.map(seconds),
        attempts: attempts.into_iter().map(|a| a.2).collect(),
        healthy_observations: healthy as u64,
        confirmed,
        verdict,
    })
}

/// The containment gate (seeds/004): applies to a run with a `[declaration]`; fails when the
/// experiment escaped.
pub fn containment_gate(run: &Run) -> Gate {
    let mut gate = Gate::new(GateId::Containment, Effect::RunInvalidating);
    gate.limit = "no declared abort trigger fires (seeds/004)".into();
    if run.config.declaration.is_none() {
        gate.note = "no [declaration]: no abort trigger was armed".into();
        return gate;
    }
    // A declared trigger's escape; the recorder's own aborts are other gates': falling behind
    // the client gate's (SPEC §2 "Falling behind"); an unconfirmed impact, an unhealthy
    // baseline and missing telemetry fault fidelity's, since the fault then never happened as
    // planned (§10).
    match run
        .events
        .all(EventKind::Escape)
        .find(|e| !RECORDER_ABORTS.contains(&e.subject.as_str()))
    {
        Some(e) => {
            gate.status = Status::Fail;
            gate.n = 1;
            gate.observed = format!(
                "escaped at {:.3} s ({}): {}",
                seconds(e.at_ns),
                e.subject,
                e.detail
            );
            gate.note = "an escaped experiment is invalid, not a finding about the service; the report keeps what incident response needs".into();
        }
        None => {
            gate.status = Status::Pass;
            gate.observed = "no trigger fired".into();
        }
    }
    gate
}

/// The retention list of an escaped experiment.
pub fn escape(run: &Run, cleanup: Option<&CleanupReport>) -> Option<EscapeReport> {
    let e = run.events.first(EventKind::Escape)?;
    let config = &run.config;
    let d = config.declaration.as_ref();
    let declared = |f: fn(&percentes_formats::config::Declaration) -> String| {
        d.map_or("not recorded (no [declaration])".to_owned(), f)
    };
    let armed = run.events.first(EventKind::FaultArmed);
    let fired = run.events.first(EventKind::FaultFired);
    let controller = match (armed, fired) {
        (_, Some(f)) => format!(
            "{}; fired at {:.3} s: {}",
            armed.map_or("not armed".to_owned(), |a| a.detail.clone()),
            seconds(f.at_ns),
            f.detail
        ),
        (Some(a), None) => format!("{}; never fired (the run stopped first)", a.detail),
        (None, None) => "no fault plan".to_owned(),
    };
    let confirmed = match run.events.first(EventKind::FaultConfirmed) {
        Some(c) => format!(
            "{} (declared {}): {} at {:.3} s",
            config.fault.victim.as_deref().unwrap_or("?"),
            declared(|d| d.boundary.clone()),
            c.detail,
            seconds(c.at_ns)
        ),
        None => format!(
            "not confirmed (declared target {})",
            declared(|d| d.target.clone())
        ),
    };
    let requests = &run.requests;
    let sent_before = (0..requests.len())
        .filter(|&r| {
            let at = requests.dispatched_ns[r];
            at != crate::frame::NONE && at <= e.at_ns
        })
        .count();
    let run_end = class_code("run-end");
    let never_sent = (0..requests.len())
        .filter(|&r| {
            requests.outcome(r) == Some(Outcome::Censored)
                && Some(requests.class[r]) == run_end
                && requests.dispatched_ns[r] == crate::frame::NONE
        })
        .count();
    let offered = format!(
        "{} rps scheduled ({} requests in the schedule); {sent_before} sent up to the escape; {never_sent} never sent after it (censored, class run-end)",
        config.rate_rps(),
        requests.len()
    );
    let window_s = d.map_or(0.0, |d| d.abort.window_s / f64::from(config.time_factor));
    let trusted_ns = e.at_ns.saturating_sub((window_s * 1e9) as u64);
    let mut last_probes: Vec<String> = config
        .target
        .replicas
        .iter()
        .map(|name| {
            match run
                .events
                .all(EventKind::Probe)
                .filter(|p| p.subject == *name && p.at_ns <= trusted_ns)
                .last()
            {
                Some(p) => format!("{name} {} at {:.3} s", p.detail, seconds(p.at_ns)),
                None => format!("{name} not probed before"),
            }
        })
        .collect();
    last_probes.sort();
    let last_trusted = format!(
        "{:.3} s, the start of the trigger's {window_s:.3} s window (nothing after it is trusted); last probes: {}",
        seconds(trusted_ns),
        last_probes.join(", ")
    );
    let attempts = match cleanup {
        Some(c) if !c.attempts.is_empty() => format!("{}; {}", c.attempts.join("; "), c.verdict),
        Some(c) => c.verdict.clone(),
        None => "no fault fired: nothing to clean up".to_owned(),
    };
    let retain = vec![
        Retained {
            item: "experiment id",
            value: declared(|d| d.experiment_id.clone()),
        },
        Retained {
            item: "release",
            value: declared(|d| d.release.clone()),
        },
        Retained {
            item: "dataset",
            value: declared(|d| d.dataset.clone()),
        },
        Retained {
            item: "controller action",
            value: controller,
        },
        Retained {
            item: "confirmed target",
            value: confirmed,
        },
        Retained {
            item: "offered load",
            value: offered,
        },
        Retained {
            item: "first escaped impact",
            value: format!("{:.3} s ({}): {}", seconds(e.at_ns), e.subject, e.detail),
        },
        Retained {
            item: "active protections",
            value: declared(|d| {
                if d.protections.is_empty() {
                    "none declared".into()
                } else {
                    d.protections.join("; ")
                }
            }),
        },
        Retained {
            item: "cleanup attempts",
            value: attempts,
        },
        Retained {
            item: "last trusted state",
            value: last_trusted,
        },
    ];
    Some(EscapeReport {
        trigger: e.subject.clone(),
        at_s: seconds(e.at_ns),
        retain,
    })
}
