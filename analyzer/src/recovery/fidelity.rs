//! The fault-fidelity evidence table (seeds/004's seven evidence points; SPEC §10, A2): each
//! filled from the journal, or marked "not evidenced" with what would evidence it.

use percentes_formats::config::FaultVariant;
use percentes_formats::journal::records::{class_name, EventKind, Outcome, TimelineSubject};
use percentes_formats::pins;

use super::amended::Plan;
use super::seconds;
use crate::load::Run;
use crate::model::Evidence;

const EVIDENCED: &str = "evidenced";
const NOT_EVIDENCED: &str = "not evidenced";

fn point(point: &'static str, required: &'static str, found: Result<String, String>) -> Evidence {
    let (status, evidence) = match found {
        Ok(text) => (EVIDENCED, text),
        Err(text) => (NOT_EVIDENCED, text),
    };
    Evidence {
        point,
        required,
        status,
        evidence,
    }
}

/// The seven evidence points of one fault run.
pub(super) fn table(run: &Run, plan: &Plan) -> Vec<Evidence> {
    let config = &run.config;
    let events = &run.events;
    let victim = config
        .fault
        .victim
        .as_deref()
        .unwrap_or("(no victim named)");
    let at = |kind: EventKind| events.first(kind);
    let fired = at(EventKind::FaultFired);
    let armed = at(EventKind::FaultArmed);
    let confirmed = at(EventKind::FaultConfirmed);
    let variant = config.fault.variant;
    let duration = match variant {
        FaultVariant::BlackHole => format!(
            "{:.3} s (fault.partition_s, expiry armed before firing)",
            seconds(config.duration_ns(&pins::FAULT_PARTITION_S))
        ),
        FaultVariant::Degradation => format!(
            "{:.3} s (fault.degradation_s)",
            seconds(config.duration_ns(&pins::FAULT_DEGRADATION_S))
        ),
        _ => "instantaneous (a deletion)".into(),
    };
    let cleanup = match variant {
        FaultVariant::CleanDelete => {
            "none requested: a deletion is not undone; the orchestrator replaces the pod"
        }
        FaultVariant::BlackHole => "the armed expiry lifts the partition",
        _ => "the armed expiry ends the degradation",
    };
    let controller = match fired {
        Some(f) => Ok(format!(
            "{}{} on {victim}; {}fired at {:.3} s ({}); duration {duration}; cleanup: {cleanup}",
            variant.name(),
            config
                .fault
                .mock_mode
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default(),
            armed
                .map(|a| format!("armed at {:.3} s, ", seconds(a.at_ns)))
                .unwrap_or_default(),
            seconds(f.at_ns),
            f.detail
        )),
        None => Err("the journal carries no fault-fired event: the control never acted".into()),
    };
    let resource = match confirmed {
        Some(c) => Ok(format!(
            "fault-confirmed at {:.3} s: {}",
            seconds(c.at_ns),
            c.detail
        )),
        None => Err("no fault-confirmed event; configure fault.confirm_path and fault.confirm_status (or confirm_contains) so an independent request confirms the impact".into()),
    };
    let detected = events.all(EventKind::Timeline).find(|e| {
        e.subject == TimelineSubject::Detected.name() && fired.is_some_and(|f| e.at_ns >= f.at_ns)
    });
    let detection = match detected {
        Some(d) => Ok(format!(
            "`detected` timeline event at {:.3} s: {}",
            seconds(d.at_ns),
            d.detail
        )),
        None => Err("no `detected` timeline event: the service's own first signal (a metric, event, health or breaker transition), journaled as a `timeline` event `detected`, would evidence it".into()),
    };
    // Clients: the classes of the requests scheduled from the fire to the removal (or the end).
    let requests = &run.requests;
    let from = fired.map_or(u64::MAX, |f| f.at_ns);
    let to = plan.removal_ns.unwrap_or(u64::MAX);
    let mut classes: Vec<(u16, u64)> = Vec::new();
    let (mut timed_out, mut shed) = (0u64, 0u64);
    for r in 0..requests.len() {
        let t = requests.intended_ns[r];
        if t < from || t >= to || requests.outcome(r).is_none() {
            continue;
        }
        let class = requests.class[r];
        match classes.iter_mut().find(|(c, _)| *c == class) {
            Some((_, n)) => *n += 1,
            None => classes.push((class, 1)),
        }
        if requests.outcome(r) == Some(Outcome::Censored) && class_name(class) == Some("timeout") {
            timed_out += 1;
        }
        if matches!(requests.http_status[r], 429 | 503) {
            shed += 1;
        }
    }
    classes.sort_unstable();
    let window = if plan.removal_ns.is_some() {
        "scheduled from the fire to the removal"
    } else {
        "scheduled from the fire on"
    };
    let clients = if classes.is_empty() {
        Err(format!("no request was {window}"))
    } else {
        Ok(format!(
            "{window}: {}",
            classes
                .iter()
                .map(|(c, n)| format!("{} {n}", class_name(*c).unwrap_or("unknown-class")))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    let protection = if timed_out + shed > 0 {
        Ok(format!(
            "of those, the client timeout censored {timed_out}, and {shed} were answered 429 or 503 (admission or shedding)"
        ))
    } else {
        Err("no request was shed (429, 503) or timed out; a protection that acted would show as such answers, or as a breaker's or admission's `timeline` event".into())
    };
    let removal = match plan.removal_ns {
        Some(_) => Ok(plan.removal_evidence.clone()),
        None => Err(plan.removal_evidence.clone()),
    };
    let residual = match crate::escape::cleanup(run) {
        Some(c) if c.confirmed => Ok(format!(
            "cleanup confirmed: {} ({} healthy observations of the target after it)",
            c.removal, c.healthy_observations
        )),
        Some(c) => Err(format!(
            "cleanup not confirmed ({}; {} healthy observations, two needed): a second healthy direct probe of {victim} after the removal would evidence it",
            c.removal, c.healthy_observations
        )),
        None => Err("no cleanup verdict: the fault never fired".into()),
    };
    vec![
        point("controller", "action, target, start, duration and requested cleanup", controller),
        point("dependency or resource", "independent confirmation of the intended impact", resource),
        point("detection", "the service's first metric, event, trace, health or breaker transition", detection),
        point("clients", "correct success, deliberate rejection, dependency failure, timeout, transport failure or incorrect success", clients),
        point("protection", "the timeout, breaker, cache, admission or shedding policy that acted", protection),
        point("removal", "independent confirmation that the fault ended", removal),
        point("residual state", "replicas, stores, caches and telemetry back to their authoritative state", residual),
    ]
}
