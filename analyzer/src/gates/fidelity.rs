//! Fault fidelity (seeds/004): the fault fired, its impact was confirmed, nothing in the plan
//! failed.

use percentes_formats::journal::records::{EventKind, BASELINE_UNHEALTHY, TELEMETRY_MISSING};

use super::Context;
use crate::model::{Effect, Gate, GateId, Status};

/// Fault fidelity (seeds/004): the fault fired, its impact was confirmed where a confirmation
/// probe was configured, and nothing in the plan failed. Otherwise the experiment is invalid,
/// which is not a product failure.
pub(super) fn fidelity(ctx: &Context<'_>) -> Gate {
    let Context {
        run,
        config,
        fault_run,
        ..
    } = *ctx;
    let mut fidelity = Gate::new(GateId::FaultFidelity, Effect::RunInvalidating);
    fidelity.limit =
        "fired; impact confirmed when confirm_address is set; no fault-failed event".into();
    if fault_run {
        let fired = run.events.first(EventKind::FaultFired);
        let failed: Vec<String> = run
            .events
            .all(EventKind::FaultFailed)
            .map(|e| e.detail.clone())
            .collect();
        let confirmed = run.events.first(EventKind::FaultConfirmed).is_some();
        let needs_confirmation = config.fault.confirm_address.is_some();
        fidelity.n = run
            .events
            .rows
            .iter()
            .filter(|e| {
                percentes_formats::journal::records::event_kind_name(e.kind)
                    .is_some_and(|k| k.starts_with("fault-"))
            })
            .count() as u64;
        let mut problems = Vec::new();
        // The recorder's live judgement before the fire (seeds/004), when it ended the run.
        let unfired = run
            .events
            .all(EventKind::Escape)
            .find(|e| [BASELINE_UNHEALTHY, TELEMETRY_MISSING].contains(&e.subject.as_str()));
        match (fired, unfired) {
            (Some(_), _) => {}
            (None, Some(e)) => problems.push(format!(
                "the fault never fired: the recorder ended the run before it ({}: {})",
                e.subject, e.detail
            )),
            (None, None) => problems.push("the fault never fired".to_owned()),
        }
        if needs_confirmation && !confirmed {
            problems.push("the impact was never independently confirmed".to_owned());
        }
        problems.extend(failed.into_iter().map(|d| format!("fault-failed: {d}")));
        fidelity.observed = if problems.is_empty() {
            format!("fired{}", if confirmed { " and confirmed" } else { "" })
        } else {
            problems.join("; ")
        };
        fidelity.status = Status::of(problems.is_empty());
        fidelity.note =
            "an experiment whose fault did not happen as planned is invalid, not a product failure"
                .into();
    } else {
        fidelity.note = "no fault".into();
    }
    fidelity
}
