//! A testbed change under test around the recording (a rollout, a proxy failover): checked
//! against the run's configuration before anything records, started on the recorder's own
//! epoch, and said in the declaration with the testbed's timeline and teardown.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::bed::{scaled, testbed_words, Bed, TestbedPlan};
use super::rollout;
use crate::error::Result;
use crate::realbed::failover::{self, FailoverEnd};
use crate::realbed::rollout::RolloutEnd;
use crate::realbed::scale_out::{self, ScaleOutEnd};
use percentes_formats::config::Config;
use percentes_recorder::run::TimelineInbox;

/// What the change did, for the declaration.
pub(super) enum Changed {
    /// No change under test.
    Nothing,
    /// The rollout's end and HAProxy's view then (`None`: the run ended before the epoch).
    Rollout(Option<(RolloutEnd, String)>),
    /// The failover's end (`None`: the run ended before the epoch).
    Failover(Option<FailoverEnd>),
    /// The scale-out's end (`None`: the run ended before the epoch).
    ScaleOut(Option<ScaleOutEnd>),
}

/// When the plan's change begins, from the schedule's epoch (`None` without one); refused when
/// the run's configuration does not fit it.
pub(super) fn check(plan: &TestbedPlan, config: &Config, factor: u32) -> Result<Option<Duration>> {
    if let Some(r) = &plan.rollout {
        return rollout::check(r, plan.replicas, config, factor).map(Some);
    }
    if let Some(f) = &plan.proxy_failover {
        let table = "testbed.proxy_failover";
        return rollout::change_under_test(table, f.start_s, config, factor).map(Some);
    }
    if let Some(s) = &plan.scale_out {
        let table = "testbed.scale_out";
        return rollout::change_under_test(table, s.start_s, config, factor).map(Some);
    }
    Ok(None)
}

/// Runs the plan's change `after` the recorder's epoch, until it is done or the run ends.
pub(super) fn control(
    plan: &TestbedPlan,
    bed: &mut Bed,
    after: Option<Duration>,
    factor: u32,
    (inbox, finished): (&TimelineInbox, &AtomicBool),
) -> Changed {
    let (Some(after), Bed::Real(real)) = (after, bed) else {
        return Changed::Nothing;
    };
    if let Some(r) = &plan.rollout {
        let drain = scaled(r.drain_timeout_s, factor);
        return Changed::Rollout(rollout::control(real, r, (after, drain), inbox, finished));
    }
    if let Some(f) = &plan.proxy_failover {
        let Some(epoch) = rollout::await_epoch(inbox, finished) else {
            return Changed::Failover(None);
        };
        let times = (epoch + after, scaled(f.restart_delay_s, factor));
        return Changed::Failover(Some(failover::fail_over(real, times, inbox, finished)));
    }
    if plan.scale_out.is_some() {
        let Some(epoch) = rollout::await_epoch(inbox, finished) else {
            return Changed::ScaleOut(None);
        };
        let end = scale_out::scale_out(real, epoch + after, inbox, finished);
        return Changed::ScaleOut(Some(end));
    }
    Changed::Nothing
}

/// The declaration's lines on the testbed: the change and how it ended, or the timeline the
/// testbed journaled, and the teardown (`steps`: seconds from the epoch and each timeline
/// event).
pub(super) fn words(
    plan: &TestbedPlan,
    changed: &Changed,
    steps: &[(f64, String)],
    teardown: Option<&str>,
) -> String {
    let teardown_line = || {
        let said = teardown.unwrap_or("not taken down by the runner");
        format!("\nTeardown: {said}\n")
    };
    match (
        changed,
        &plan.rollout,
        &plan.proxy_failover,
        &plan.scale_out,
    ) {
        (Changed::Rollout(ended), Some(r), ..) => rollout::words(
            r,
            (plan.replicas, steps),
            ended.as_ref(),
            teardown.unwrap_or_default(),
        ),
        (Changed::Failover(ended), _, Some(f), _) => {
            failover::words(f, ended.as_ref(), steps) + &teardown_line()
        }
        (Changed::ScaleOut(ended), _, _, Some(s)) => {
            scale_out::words(s, ended.as_ref(), steps) + &teardown_line()
        }
        _ => teardown.map_or(String::new(), |t| testbed_words(steps, t)),
    }
}
