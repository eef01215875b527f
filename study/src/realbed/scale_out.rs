//! Scale-out under overload on real parts (issue 56 item 2): one replica serving more than its
//! capacity, and a second one started mid-run, as an autoscaler's decision would start it.
//!
//! The testbed starts the serving replicas and declares one more to HAProxy, out of service. At
//! its stated second the controller journals the decision, starts the new replica from the same
//! command, and journals each boundary of its way to useful capacity as it sees it: the
//! process's start (`container-start`), its weights loaded (`weight-load`, from its log), its
//! first ready answer, and HAProxy putting it in service once its own health check passed. The
//! first request it serves and the goodput's return are the journal's: read from the requests
//! it answered (`x-upstream`) and the report's windows, and the serving replica's queue from
//! its own metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::rollout::{await_ready, put_in_service, start_replica, Halt};
use super::RealBed;
use crate::error::{bail, Result};
use percentes_formats::journal::change::{Change, DECIDED, READY};
use percentes_formats::journal::records::TimelineSubject;
use percentes_recorder::run::TimelineInbox;

/// The tag every scale-out step's detail opens with (formats/JOURNAL.md).
const TAG: &str = Change::ScaleOut.prefix();

/// `[testbed.scale_out]`: when the second replica is started.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScaleOutPlan {
    /// Experiment seconds into the measurement at which the decision is taken and the new
    /// replica started (divided by the time factor): the measurement before it is the
    /// overloaded replica alone.
    pub start_s: f64,
    /// The measurement's length in real seconds under the dev profile (`dev.measure_s`), for a
    /// replica slower to start than the scaled measurement lasts (vLLM on half a CPU beside a
    /// busy one: a minute or more); absent, the pinned baseline after the time factor.
    #[serde(default)]
    pub measure_s: Option<f64>,
}

impl ScaleOutPlan {
    /// Its times in range.
    pub fn check(&self) -> Result<()> {
        if !(self.start_s.is_finite() && (0.0..=3600.0).contains(&self.start_s)) {
            bail!(
                "[testbed.scale_out] start_s = {} must lie in 0..=3600",
                self.start_s
            );
        }
        if let Some(m) = self.measure_s {
            if !(m.is_finite() && (10.0..=7200.0).contains(&m)) {
                bail!("[testbed.scale_out] measure_s = {m} must lie in 10..=7200 (real seconds)");
            }
        }
        Ok(())
    }
}

/// How a scale-out ended.
#[derive(Clone, Debug, PartialEq)]
pub enum ScaleOutEnd {
    /// The new replica serves: from the decision to HAProxy putting it in service.
    InService(Duration),
    /// It did not start, exited, never answered or was never counted up; the detail says why.
    Failed(String),
    /// The run ended before the decision or before the replica was in service.
    Unfinished,
}

/// Takes the decision at `at`: starts the bed's standby replica and brings it into service,
/// each boundary reported into `inbox`.
pub fn scale_out(
    bed: &mut RealBed,
    at: Instant,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> ScaleOutEnd {
    while Instant::now() < at {
        if finished.load(Ordering::Relaxed) {
            return ScaleOutEnd::Unfinished;
        }
        std::thread::sleep(
            Duration::from_millis(10).min(at.saturating_duration_since(Instant::now())),
        );
    }
    let Some((name, port)) = bed.standby.first().cloned() else {
        return ScaleOutEnd::Failed("the testbed declared no replica to scale out to".into());
    };
    let decided = Instant::now();
    inbox.report_at(
        decided,
        TimelineSubject::Orchestrator,
        &format!("{TAG}{DECIDED}{name}"),
        None,
    );
    match bring_in(bed, (&name, port), inbox, finished) {
        Ok(()) => {
            let took = decided.elapsed();
            inbox.report(
                TimelineSubject::Orchestrator,
                &format!(
                    "{}{name} in service {:.3} s after the decision",
                    Change::ScaleOut.complete_tag(),
                    took.as_secs_f64()
                ),
                None,
            );
            ScaleOutEnd::InService(took)
        }
        Err(Halt::RunEnded) => ScaleOutEnd::Unfinished,
        Err(Halt::Failed(why)) => {
            let why = format!("{TAG}{why}");
            inbox.report(TimelineSubject::RestartFailed, &why, None);
            ScaleOutEnd::Failed(why)
        }
    }
}

/// Starts `name` on `port` from the testbed's replica command, waits for its weights and ready
/// path, and has HAProxy put it in service once its own check passed.
fn bring_in(
    bed: &mut RealBed,
    (name, port): (&str, u16),
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> std::result::Result<(), Halt> {
    let log = bed.folder.join(format!("{name}.log"));
    let plan = bed.plan.clone();
    let index = start_replica(bed, &plan, (name, port))
        .map_err(|e| Halt::Failed(format!("{name} did not start: {e:#}")))?;
    inbox.report(
        TimelineSubject::ContainerStart,
        &format!(
            "{TAG}{name} started, pid {}, port {port}",
            bed.replicas[index].child.id()
        ),
        None,
    );
    await_ready(bed, index, &log, inbox, finished)?;
    inbox.report(
        TimelineSubject::Orchestrator,
        &format!(
            "{TAG}{name}{READY}{} after {:.3} s",
            plan.ready_path,
            bed.replicas[index].started.elapsed().as_secs_f64()
        ),
        None,
    );
    let label = |what: &str| format!("{TAG}{what}");
    put_in_service(bed, ("the same release", name), &label, inbox, finished)
}

/// The declaration's lines on the scale-out: how it ended and each boundary as the journal holds
/// it (`steps`: seconds from the epoch and the event).
pub fn words(plan: &ScaleOutPlan, ended: Option<&ScaleOutEnd>, steps: &[(f64, String)]) -> String {
    let planned = format!(
        "a second replica started {} experiment seconds into the measurement",
        plan.start_s
    );
    let ended = match ended {
        Some(ScaleOutEnd::InService(took)) => {
            format!("in service {:.3} s after the decision", took.as_secs_f64())
        }
        Some(ScaleOutEnd::Failed(why)) => format!("FAILED: {why}"),
        Some(ScaleOutEnd::Unfinished) | None => {
            "unfinished: the run ended before the new replica was in service".to_owned()
        }
    };
    super::rollout::change_words("The scale-out", &planned, &ended, steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_out_of_range_is_refused_and_the_words_say_how_it_ended() {
        ScaleOutPlan {
            start_s: 60.0,
            measure_s: Some(240.0),
        }
        .check()
        .unwrap();
        for (start_s, measure_s, key) in [
            (-1.0, None, "start_s"),
            (60.0, Some(1.0), "measure_s"),
            (60.0, Some(f64::INFINITY), "measure_s"),
        ] {
            let why = ScaleOutPlan { start_s, measure_s }
                .check()
                .unwrap_err()
                .to_string();
            assert!(why.contains(key), "{why}");
        }
        let plan = ScaleOutPlan {
            start_s: 60.0,
            measure_s: None,
        };
        let text = words(
            &plan,
            Some(&ScaleOutEnd::InService(Duration::from_millis(61_250))),
            &[(
                50.0,
                "orchestrator: scale-out: decided to start replica-1".into(),
            )],
        );
        assert!(
            text.contains("in service 61.250 s after the decision"),
            "{text}"
        );
        assert!(
            text.contains("- 50.000 s: orchestrator: scale-out: decided"),
            "{text}"
        );
        let text = words(&plan, Some(&ScaleOutEnd::Failed("it exited".into())), &[]);
        assert!(text.contains("FAILED: it exited"), "{text}");
    }
}
