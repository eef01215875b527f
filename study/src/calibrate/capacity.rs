//! What a calibration measures beside lambda_max (SPEC §10 "Capacity check", A4): the capacity
//! probe a run on another day or host is checked against, each step's completed rate, and the
//! throughput ceiling at the survivor's load (the knee lambda_max is where the SLO stops
//! holding; the ceiling is what the replica completes past it).

use percentes_analyzer::load::Run;
use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::probe::{self, CapacityProbe};
use percentes_formats::journal::Outcome;
use serde::Serialize;

use super::{Ramp, Step};
use crate::error::Result;

/// The throughput ceiling's step: one replica offered the survivor's load after a loss.
#[derive(Clone, Debug, Serialize)]
pub struct Ceiling {
    /// The rate offered: the configured replicas x lambda_r on the replicas that remain.
    pub offered_rps: f64,
    /// What the replica completed over the measured span, per second; `None` when the step
    /// did not observe the target (its client gate failed).
    pub completed_rps: Option<f64>,
    /// Its journal's file name.
    pub journal: String,
    /// The reading in words.
    pub note: String,
}

/// The median of a journal's capacity probe, ms; `None` when it holds none or a damaged one.
pub(super) fn probe_ms(run: &Run) -> Option<f64> {
    let value = run.header.fact(HostFact::CapacityProbe)?;
    CapacityProbe::parse(value).ok()?.median_ms()
}

/// The requests that completed inside `[start_s, end_s)` of the run's clock, per second: a
/// replica's throughput over the span, whatever the rate it was offered.
pub(super) fn completed_rps(run: &Run, (start_s, end_s): (f64, f64)) -> Option<f64> {
    let span = end_s - start_s;
    if span.is_nan() || span <= 0.0 {
        return None;
    }
    let requests = &run.requests;
    let (start_ns, end_ns) = (start_s * 1e9, end_s * 1e9);
    let completed = (0..requests.len())
        .filter(|&row| requests.outcome(row) == Some(Outcome::Completed))
        .filter(|&row| {
            let at = requests.terminal_ns[row] as f64;
            at >= start_ns && at < end_ns
        })
        .count();
    Some(completed as f64 / span)
}

/// The calibration's capacity probe: the median of its counted steps' probe medians (every
/// step of every calibration is a recording with its own pre-flight), ms.
pub(super) fn reference_probe(calibrations: &[Ramp]) -> Option<f64> {
    let medians: Vec<f64> = calibrations
        .iter()
        .flat_map(|c| &c.steps)
        .filter_map(|s| s.probe_ms)
        .collect();
    probe::median(&medians)
}

/// The load one survivor is offered after one of `replicas` is lost, each offered
/// `lambda_r` before; `None` without a survivor.
pub(super) fn survivor_rps(replicas: usize, lambda_r: f64) -> Option<f64> {
    let survivors = replicas.checked_sub(1).filter(|&s| s > 0)?;
    Some(replicas as f64 * lambda_r / survivors as f64)
}

/// Records the ceiling's step (`ceiling-RATErps`): one replica offered `offered`, the
/// survivor's load. A recording that fails is said in the note, never the calibration's end:
/// lambda_max stands without it.
/// `record(stem)` records and analyzes it.
pub(super) fn measure(
    record: impl FnOnce(&str) -> Result<Step>,
    offered: f64,
    kept_up: f64,
) -> Ceiling {
    let stem = format!("ceiling-{offered}rps");
    out!("  throughput ceiling: one step at the survivor's load, {offered} rps ({stem})");
    match record(&stem) {
        Ok(step) => {
            let completed = step
                .client_gate
                .is_empty()
                .then_some(step.completed_rps)
                .flatten();
            Ceiling {
                offered_rps: offered,
                completed_rps: completed,
                journal: step.journal,
                note: ceiling_note(offered, completed, kept_up),
            }
        }
        Err(why) => Ceiling {
            offered_rps: offered,
            completed_rps: None,
            journal: format!("{stem}.pj"),
            note: format!(
                "offered the survivor's {offered} rps, the step could not be recorded: {why}"
            ),
        },
    }
}

/// The `[calibration]` section a run configuration takes from a calibration's lambda_max,
/// probe and ceiling.
pub(super) fn stanza(
    lambda_max_rps: Option<f64>,
    probe_ms: Option<f64>,
    ceiling: Option<&Ceiling>,
) -> String {
    let mut text = String::from("[calibration]\n");
    if let Some(max) = lambda_max_rps {
        text.push_str(&format!("lambda_max_rps = {max}\n"));
    }
    if let Some(probe) = probe_ms {
        text.push_str(&format!("probe_ms = {probe:.3}\n"));
    }
    if let Some(Ceiling {
        offered_rps,
        completed_rps: Some(completed),
        ..
    }) = ceiling
    {
        text.push_str(&format!(
            "ceiling_rps = {completed:.3}\nceiling_offered_rps = {offered_rps}\n"
        ));
    }
    text
}

/// The ceiling in words, from what its step completed of what it was offered; `kept_up` is
/// the share a passing step must complete (§10's goodput floor).
pub(super) fn ceiling_note(offered: f64, completed: Option<f64>, kept_up: f64) -> String {
    match completed {
        Some(done) if done >= offered * kept_up => format!(
            "offered the survivor's {offered} rps, the replica completed {done:.3} rps: it keeps up with that load, so its throughput ceiling lies above it (the overload past lambda_max is in latency, not throughput)"
        ),
        Some(done) => format!(
            "offered the survivor's {offered} rps, the replica completed {done:.3} rps: that is its throughput ceiling, and the survivor's load is {:.2} x it",
            offered / done
        ),
        None => format!(
            "offered the survivor's {offered} rps, the step did not observe the replica (its client gate failed): no ceiling"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_survivor_gets_the_lost_replicas_share() {
        // Two replicas at 13 rps each: the survivor alone gets 26 (1.30 x a lambda_max of 20).
        assert_eq!(survivor_rps(2, 13.0), Some(26.0));
        // Three at 13: two survivors share 39, 19.5 each.
        assert_eq!(survivor_rps(3, 13.0), Some(19.5));
        assert_eq!(survivor_rps(1, 13.0), None);
        assert_eq!(survivor_rps(0, 13.0), None);
    }

    #[test]
    fn the_stanza_carries_what_a_run_is_checked_against() {
        let measured = Ceiling {
            offered_rps: 26.0,
            completed_rps: Some(22.5),
            journal: "ceiling-26rps.pj".into(),
            note: String::new(),
        };
        assert_eq!(
            stanza(Some(20.0), Some(41.25), Some(&measured)),
            "[calibration]\nlambda_max_rps = 20\nprobe_ms = 41.250\nceiling_rps = 22.500\nceiling_offered_rps = 26\n"
        );
        // A ceiling step that did not observe the replica gives no ceiling keys.
        let unobserved = Ceiling {
            completed_rps: None,
            ..measured
        };
        assert_eq!(
            stanza(Some(20.0), Some(41.25), Some(&unobserved)),
            "[calibration]\nlambda_max_rps = 20\nprobe_ms = 41.250\n"
        );
    }

    #[test]
    fn a_step_that_kept_up_bounds_the_ceiling_from_below() {
        let kept = ceiling_note(26.0, Some(25.9), 0.99);
        assert!(kept.contains("lies above it"), "{kept}");
        let saturated = ceiling_note(26.0, Some(20.0), 0.99);
        assert!(saturated.contains("1.30 x it"), "{saturated}");
        assert!(ceiling_note(26.0, None, 0.99).contains("no ceiling"));
    }
}
