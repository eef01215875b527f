//! The baseline gates: G5 accelerator fingerprints (campaign-level), G6 baseline goodput and G7
//! the baseline's waiting queue (SPEC §4, §10).

use percentes_formats::config::TargetKind;
use percentes_formats::pins;

use super::waiting_samples;
use super::Context;
use crate::model::{Effect, Gate, GateId, Status};

/// G5: compared across the runs of a campaign.
pub(super) fn g5(ctx: &Context<'_>) -> Gate {
    let Context { config, .. } = *ctx;
    let mut g5 = Gate::new(GateId::AcceleratorFingerprints, Effect::RunInvalidating);
    g5.limit = "clock and power fingerprints equal across the campaign's runs".into();
    g5.status = match config.target.kind {
        TargetKind::Mock => Status::NotApplicable,
        TargetKind::Hosted => Status::NotEvaluable,
        TargetKind::SelfHosted => Status::CampaignLevel,
    };
    g5.note = match config.target.kind {
        TargetKind::Mock => "the mock has no accelerator".into(),
        TargetKind::Hosted => "hosted target: server-side, not verifiable (§6)".into(),
        TargetKind::SelfHosted => {
            "evaluated by `percentes campaign` from each journal's `accelerator.*` host facts, which the recorder journals from target.accelerator_commands (without them G5 is unobserved)"
                .into()
        }
    };
    g5
}

/// G6: the baseline's goodput.
pub(super) fn g6(ctx: &Context<'_>) -> Gate {
    let Context {
        config,
        hosted,
        fault_run,
        baseline_rows,
        met,
        ..
    } = *ctx;
    let mut g6 = Gate::new(
        GateId::BaselineGoodput,
        if hosted {
            Effect::Reported
        } else {
            Effect::RunInvalidating
        },
    );
    let min = config.number(&pins::GATES_BASELINE_GOODPUT_MIN);
    g6.limit = format!(">= {min}");
    if fault_run {
        g6.n = baseline_rows.len() as u64;
        if baseline_rows.is_empty() {
            g6.status = Status::Unobserved;
            g6.observed = "the baseline window is empty".into();
        } else {
            let goodput = baseline_rows.iter().filter(|&&r| met[r]).count() as f64
                / baseline_rows.len() as f64;
            g6.observed = format!("{goodput:.4}");
            g6.status = Status::of(goodput >= min);
            if goodput < min {
                g6.by = Some(format!("{:.4} under", min - goodput));
            }
            if hosted {
                g6.note =
                    "hosted: completion within the timeout, reported, not run-invalidating (§6)"
                        .into();
            }
        }
    } else {
        g6.note = "no fault: no baseline window".into();
    }
    g6
}

/// G7: the baseline's mean waiting-queue gauge per replica, from probe events.
pub(super) fn g7(ctx: &Context<'_>) -> Gate {
    let Context {
        run,
        config,
        hosted,
        fault_run,
        baseline,
        cut,
        ..
    } = *ctx;
    let mut g7 = Gate::new(GateId::WaitingQueue, Effect::RunInvalidating);
    let limit = config.number(&pins::GATES_WAITING_QUEUE_MAX);
    g7.limit = format!("mean <= {limit} per replica over the baseline");
    if hosted {
        g7.status = Status::NotEvaluable;
        g7.note = "hosted target: server-side, not verifiable (§6)".into();
    } else if fault_run {
        let window = baseline.map(|i| cut[i]);
        let samples = waiting_samples(run);
        let mut readings = Vec::new();
        let mut unobserved = Vec::new();
        let mut worst = f64::NEG_INFINITY;
        for name in &config.target.replicas {
            let values: Vec<f64> = samples
                .iter()
                .filter(|(at, who, _)| *who == name && window.is_some_and(|w| w.contains(*at)))
                .map(|&(_, _, v)| v)
                .collect();
            g7.n += values.len() as u64;
            if values.is_empty() {
                unobserved.push(name.as_str());
            } else {
                let mean = values.iter().sum::<f64>() / values.len() as f64;
                worst = worst.max(mean);
                readings.push(format!("{name} {mean:.3}"));
            }
        }
        g7.observed = readings.join(", ");
        if !unobserved.is_empty() {
            g7.status = Status::Unobserved;
            g7.note = format!(
                "no waiting-queue probe of {} in the baseline (the recorder probes replicas listed in target.replica_addresses)",
                unobserved.join(", ")
            );
        } else if worst <= limit {
            g7.status = Status::Pass;
        } else {
            g7.status = Status::Fail;
            g7.by = Some(format!("{:.3} over", worst - limit));
        }
    } else {
        g7.note = "no fault: not a run of the §1 experiment".into();
    }
    g7
}
