//! The capacity check (SPEC §10 "Capacity check", A4): the pre-flight's capacity probe against
//! the one the configuration's calibration measured, and the survivor's load against the
//! throughput ceiling the calibration measured. Reported, never invalidating on its own: one
//! run's probe is a handful of requests; a campaign refuses a group whose runs' probes differ
//! ([`crate::summaries`]).

use percentes_formats::config::{Config, FaultVariant, TargetKind};
use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::probe::{self, CapacityProbe};
use percentes_formats::pins;
use percentes_formats::spec::CapacityCheck;

use crate::load::Run;
use crate::model::{Effect, Gate, GateId, Status};

/// The check, under a version that makes it (v0.5); `None` under an older one, so its gate
/// list stays as it was.
pub fn gate(run: &Run, rule: CapacityCheck) -> Option<Gate> {
    if rule == CapacityCheck::Unchecked {
        return None;
    }
    let config = &run.config;
    let mut gate = Gate::new(GateId::Capacity, Effect::Reported);
    let tolerance = config.number(&pins::CALIBRATION_CAPACITY_TOLERANCE_PERCENT);
    let Some(lambda_max) = config.calibration.lambda_max_rps else {
        gate.note = "the configuration carries no calibration (calibration.lambda_max_rps)".into();
        return Some(gate);
    };
    if config.calibration.step {
        gate.note = "a calibration step: it measures the probe a run is checked against".into();
        return Some(gate);
    }
    if config.target.kind == TargetKind::Mock {
        gate.note = "the mock is built to the configured capacity".into();
        return Some(gate);
    }
    gate.limit = match config.calibration.probe_ms {
        Some(reference) => format!(
            "probe median within {tolerance} % (of the larger) of the calibration's {reference:.1} ms"
        ),
        None => format!(
            "probe median within {tolerance} % (of the larger) of the calibration's probe_ms"
        ),
    };
    let read = match run.header.fact(HostFact::CapacityProbe) {
        None => Err("the journal holds no capacity probe (target.preflight = false, or a recorder older than the probe)".to_owned()),
        Some(value) => CapacityProbe::parse(value).map_err(|e| e.to_string()),
    };
    let probe = read.and_then(|p| match p.median_ms() {
        Some(median) => Ok((median, p.samples_ms.len())),
        None => Err("no sample request of the probe was answered".into()),
    });
    let mut note = Vec::new();
    match (probe, config.calibration.probe_ms) {
        (Err(why), _) => {
            gate.status = Status::Unobserved;
            note.push(why);
        }
        (Ok((median, n)), None) => {
            gate.status = Status::Unobserved;
            gate.n = n as u64;
            gate.observed = format!("median {median:.1} ms over {n} sample(s)");
            note.push("the configuration carries no calibration.probe_ms to check it against (`percentes calibrate` writes it)".into());
        }
        (Ok((median, n)), Some(reference)) => {
            gate.n = n as u64;
            let apart = probe::apart(median, reference) * 100.0;
            gate.observed = format!(
                "median {median:.1} ms over {n} sample(s), {apart:.1} % apart ({:.2} x the calibration's)",
                median / reference
            );
            gate.status = Status::of(apart <= tolerance);
            if apart > tolerance {
                gate.by = Some(format!("{:.1} points over", apart - tolerance));
                note.push(format!(
                    "this host did not serve one request as the calibrated one did: the configuration's lambda_max {lambda_max} rps is not its capacity, and the load's multiples of it (the survivor's 1.30 x) are not this run's; calibrate on this host"
                ));
            }
        }
    }
    note.extend(survivor(config, lambda_max));
    gate.note = note.join("; ");
    Some(gate)
}

/// The survivors' load after the loss against the capacity and the ceiling the calibration
/// measured, for a fault run with a survivor.
fn survivor(config: &Config, lambda_max: f64) -> Option<String> {
    let survivors = config.target.replicas.len().checked_sub(1)?;
    if config.fault.variant == FaultVariant::None || survivors == 0 {
        return None;
    }
    let offered = config.rate_rps() / survivors as f64;
    let against_capacity = format!(
        "after the loss each survivor is offered {offered:.3} rps, {:.2} x lambda_max (the SLO capacity)",
        offered / lambda_max
    );
    // A step that completed the share a passing calibration step must kept up with its load:
    // its ceiling lies above the offered rate, not at the completed one.
    let kept_up = config.number(&pins::CALIBRATION_STEP_GOODPUT_MIN);
    let ceiling = match (
        config.calibration.ceiling_rps,
        config.calibration.ceiling_offered_rps,
    ) {
        (Some(completed), Some(step)) if completed >= step * kept_up => format!(
            "the calibration's replica completed {completed:.3} rps of {step:.3} offered, so its throughput ceiling is at least that: at most {:.2} x it",
            offered / completed
        ),
        (Some(completed), Some(step)) => format!(
            "{:.2} x its throughput ceiling (the calibration's replica completed {completed:.3} rps when offered {step:.3})",
            offered / completed
        ),
        _ => "no throughput ceiling in the configuration (calibration.ceiling_rps, written by `percentes calibrate`)".into(),
    };
    Some(format!("{against_capacity}, {ceiling}"))
}
