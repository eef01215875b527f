//! G1: each replica's share of the baseline's requests (SPEC §1).

use percentes_formats::config::Routing;
use percentes_formats::pins;
use percentes_formats::spec::Claims;

use super::Context;
use crate::model::{Effect, Gate, GateId, Status};

/// G1 over the baseline's attributed requests.
pub(super) fn g1(ctx: &Context<'_>) -> Gate {
    let Context {
        run,
        config,
        hosted,
        variant,
        fault_run,
        baseline_rows,
        ..
    } = *ctx;
    // G1: replica share over the baseline's attributed requests.
    let mut g1 = Gate::new(GateId::ReplicaShare, Effect::RunInvalidating);
    // Per-connection routing spreads connections, not requests: the share is recorded only, and
    // only traffic reaching fewer replicas than declared fails the run (SPEC §1).
    let layer_4 = config.target.routing == Some(Routing::Layer4);
    let low = config.number(&pins::GATES_REPLICA_SHARE_MIN_PERCENT);
    let high = config.number(&pins::GATES_REPLICA_SHARE_MAX_PERCENT);
    g1.limit = format!(
        "each of {} replicas {low}-{high} % of the baseline's requests",
        config.target.replicas.len()
    );
    if hosted {
        g1.status = Status::NotEvaluable;
        g1.note =
            "hosted target: a server-side pin is reported not verifiable, never satisfied (§6)"
                .into();
    } else if fault_run && !variant.is_replica_loss() {
        g1.note = "a degradation scenario, not the §1 replica-loss experiment".into();
    } else if fault_run {
        let requests = &run.requests;
        let attributed: Vec<&str> = baseline_rows
            .iter()
            .filter_map(|&r| requests.replica_name(r))
            .collect();
        g1.n = attributed.len() as u64;
        if attributed.is_empty() {
            g1.status = Status::Unobserved;
            g1.observed = "no baseline request names its replica".into();
            if layer_4 {
                g1.effect = Effect::Reported;
                g1.note = "per-connection (layer-4) routing declared (target.routing): the share is recorded only, and with no request naming its replica neither it nor whether traffic reached every declared replica is observed".into();
            }
        } else {
            let mut shares = Vec::new();
            let mut worst: Option<f64> = None;
            for name in &config.target.replicas {
                let count = attributed.iter().filter(|&&a| a == name).count();
                let share = count as f64 / attributed.len() as f64 * 100.0;
                shares.push(format!("{name} {share:.2} %"));
                let miss = if share < low {
                    low - share
                } else if share > high {
                    share - high
                } else {
                    0.0
                };
                worst = Some(worst.map_or(miss, |w: f64| w.max(miss)));
            }
            let strangers: Vec<&str> = {
                let mut s: Vec<&str> = attributed
                    .iter()
                    .copied()
                    .filter(|a| !config.target.replicas.iter().any(|r| r == a))
                    .collect();
                s.sort_unstable();
                s.dedup();
                s
            };
            let reached = config
                .target
                .replicas
                .iter()
                .filter(|r| attributed.contains(&r.as_str()))
                .count();
            g1.observed = shares.join(", ");
            if !strangers.is_empty() {
                g1.observed.push_str(&format!(
                    "; undeclared replicas served: {}",
                    strangers.join(", ")
                ));
            }
            let victim = config.fault.victim.as_deref().unwrap_or("");
            let assumed = match (config.target.routing, ctx.claims) {
                (Some(Routing::Layer4), _) => "per-connection (layer-4) routing declared (target.routing), so the share is recorded only and only traffic reaching fewer replicas than declared fails the run".to_owned(),
                (Some(Routing::Layer7), _) => "per-request (layer-7) balancing declared (target.routing), so a share outside the band fails the run".to_owned(),
                // A3: the note says what the gate does, not a verdict its status may contradict.
                (None, Claims::Supported) => "per-request (layer-7) balancing assumed, so a share outside the band fails the run (the configuration names no routing regime)".to_owned(),
                (None, Claims::Unguarded) => "per-request (layer-7) balancing assumed, so the share gate fails the run (the configuration names no routing regime)".to_owned(),
            };
            g1.note = format!(
                "killed replica {victim}; {assumed}{}",
                if reached < config.target.replicas.len() {
                    "; traffic reached fewer replicas than declared"
                } else {
                    ""
                }
            );
            if let Some(header) = &config.target.replica_header {
                g1.note.push_str(&format!(
                    "; each request attributed by the response header {header} (target.replica_header), an address in it read as the replica target.replica_addresses gives it"
                ));
            }
            let miss = worst.unwrap_or(0.0);
            let missed_a_replica = reached < config.target.replicas.len();
            if missed_a_replica || miss > 0.0 {
                g1.status = Status::Fail;
                g1.by = Some(format!("{miss:.2} percentage points outside"));
            } else {
                g1.status = Status::Pass;
            }
            if layer_4 && !missed_a_replica {
                g1.effect = Effect::Reported;
            }
        }
    } else {
        g1.note = "no fault: not a run of the §1 experiment".into();
    }
    g1
}
