//! The black-hole gates (SPEC §1): G3 victim silence and G4 staleness (label-only), and the
//! node-monitor grace rule (run-invalidating).

use percentes_formats::config::FaultVariant;
use percentes_formats::journal::records::{EventKind, Outcome, TimelineSubject};
use percentes_formats::pins;

use super::Context;
use crate::frame::NONE;
use crate::model::{Effect, Gate, GateId, Status};
use crate::windows::Kind;

/// A recorded node-monitor grace period of the pinned length or more fails the run.
pub(super) fn grace(ctx: &Context<'_>) -> Gate {
    let Context { run, variant, .. } = *ctx;
    let mut grace = Gate::new(GateId::NodeMonitorGrace, Effect::RunInvalidating);
    let grace_limit = pins::value::FAULT_NODE_MONITOR_GRACE_FAIL_S;
    grace.limit = format!("< {grace_limit} s when recorded");
    match run
        .events
        .all(EventKind::Timeline)
        .find(|e| e.subject == TimelineSubject::NodeMonitorGrace.name())
        .and_then(|e| e.value)
    {
        Some(seconds) if variant == FaultVariant::BlackHole => {
            grace.n = 1;
            grace.observed = format!("{seconds} s");
            grace.status = Status::of(seconds < grace_limit);
        }
        _ => {
            grace.note = if variant == FaultVariant::BlackHole {
                "not recorded in the journal (a `timeline` event `node-monitor-grace` carries it)"
                    .into()
            } else {
                "applies to black-hole runs".into()
            };
        }
    }
    grace
}

/// G3 (victim silence) and G4 (staleness) for a black-hole run; label-only.
pub(super) fn g3_g4(ctx: &Context<'_>) -> Vec<Gate> {
    let Context { run, cut, .. } = *ctx;
    let config = &run.config;
    let mut g3 = Gate::new(GateId::VictimSilence, Effect::LabelOnly);
    let mut g4 = Gate::new(GateId::Staleness, Effect::LabelOnly);
    g3.limit = "no errored request among those in flight on the victim at fire; every non-completion censored at the timeout".into();
    let staleness_ns = config.duration_ns(&pins::FAULT_STALENESS_MIN_S);
    g4.limit = format!(
        ">= {:.3} s of victim-bound traffic after fire",
        staleness_ns as f64 / 1e9
    );
    if config.fault.variant != FaultVariant::BlackHole {
        g3.note = "black-hole runs only".into();
        g4.note = "black-hole runs only".into();
        return vec![g3, g4];
    }
    let Some(fired) = run.events.first(EventKind::FaultFired).map(|e| e.at_ns) else {
        for g in [&mut g3, &mut g4] {
            g.status = Status::Unobserved;
            g.note = "the fault never fired".into();
        }
        return vec![g3, g4];
    };
    let requests = &run.requests;
    let victim = config.fault.victim.as_deref().unwrap_or("");
    let timeout = config.duration_ns(&pins::CLIENT_TIMEOUT_S);
    // In flight at fire and bound for the victim: attributed to it, or never answered (a
    // black-holed request gets no response header) and not attributed to a survivor.
    let in_flight: Vec<usize> = (0..requests.len())
        .filter(|&r| {
            let d = requests.dispatched_ns[r];
            d != NONE && d <= fired && requests.terminal_ns[r] >= fired
        })
        .filter(|&r| requests.replica_name(r).is_none_or(|n| n == victim))
        .collect();
    g3.n = in_flight.len() as u64;
    if in_flight.is_empty() {
        g3.status = Status::Unobserved;
        g3.note = "no request was in flight on the victim at fire".into();
    } else {
        let errored = in_flight
            .iter()
            .filter(|&&r| requests.outcome(r) == Some(Outcome::Errored))
            .count();
        let off_timeout = in_flight
            .iter()
            .filter(|&&r| requests.outcome(r) == Some(Outcome::Censored))
            .filter(|&&r| requests.terminal_ns[r].saturating_sub(requests.intended_ns[r]) < timeout)
            .count();
        g3.observed = format!(
            "{errored} errored, {off_timeout} censored before the timeout, of {}",
            in_flight.len()
        );
        g3.status = Status::of(errored == 0 && off_timeout == 0);
    }
    // G4: victim-bound traffic (requests censored at the timeout, never answered) dispatched at
    // least the pinned staleness after the fire.
    let end = cut
        .iter()
        .find(|w| w.kind == Kind::Cooldown)
        .map_or(u64::MAX, |w| w.start_ns);
    let last_victim_bound = (0..requests.len())
        .filter(|&r| {
            requests.dispatched_ns[r] != NONE
                && requests.dispatched_ns[r] >= fired
                && requests.intended_ns[r] < end
        })
        .filter(|&r| {
            requests.outcome(r) == Some(Outcome::Censored)
                && requests.replica_name(r).is_none_or(|n| n == victim)
        })
        .map(|r| requests.dispatched_ns[r])
        .max();
    match last_victim_bound {
        None => {
            g4.status = Status::Unobserved;
            g4.note = "no victim-bound request after the fire".into();
        }
        Some(at) => {
            let stale = at - fired;
            g4.n = 1;
            g4.observed = format!(
                "victim-bound traffic until {:.3} s after fire",
                stale as f64 / 1e9
            );
            g4.status = Status::of(stale >= staleness_ns);
            if stale < staleness_ns {
                g4.by = Some(format!(
                    "{:.3} s short",
                    (staleness_ns - stale) as f64 / 1e9
                ));
            }
        }
    }
    vec![g3, g4]
}
