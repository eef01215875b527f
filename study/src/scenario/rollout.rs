//! A scenario's rollout ([`crate::realbed::rollout`]) around the recording: the run's
//! configuration checked against the plan before anything records, the controller started on
//! the recorder's own epoch, and what it did said in the declaration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::{bail, Result};
use crate::realbed::rollout::{end_state, roll, RolloutEnd, RolloutTimes};
use crate::realbed::{RealBed, RolloutPlan};
use percentes_formats::config::{Config, FaultVariant};
use percentes_recorder::run::TimelineInbox;

/// When the rollout's first step begins, from the schedule's epoch: the warm-up, then `start_s`
/// of the measurement (both after the time factor). Refused unless the run has no fault of its
/// own (the rollout is the change under test), its release map is the plan's, and the first
/// step begins inside the measurement.
pub(super) fn check(
    rollout: &RolloutPlan,
    replicas: usize,
    config: &Config,
    factor: u32,
) -> Result<Duration> {
    let after = change_under_test("testbed.rollout", rollout.start_s, config, factor)?;
    let wanted = rollout.releases(replicas);
    let given: Vec<(String, String)> = config
        .target
        .replica_releases
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut sorted = wanted.clone();
    sorted.sort();
    if given != sorted {
        let map: Vec<String> = wanted
            .iter()
            .map(|(name, release)| format!("{name:?} = {release:?}"))
            .collect();
        bail!(
            "target.replica_releases must attribute each replica to the release it serves: {{ {} }} ({} of {:?}, then {} of {:?})",
            map.join(", "),
            replicas,
            rollout.from,
            replicas,
            rollout.to
        );
    }
    for (name, _) in &wanted {
        if !config.target.replicas.contains(name) {
            bail!("target.replicas must list {name:?}: the rollout starts it and HAProxy names it in x-upstream");
        }
    }
    Ok(after)
}

/// When a testbed change under test (a rollout, a proxy failover: `[table]`) begins, from the
/// schedule's epoch: the warm-up, then `start_s` of the measurement (both after the time
/// factor). Refused unless the run has no fault of its own (the change is the one under test)
/// and it begins inside the measurement.
pub(super) fn change_under_test(
    table: &str,
    start_s: f64,
    config: &Config,
    factor: u32,
) -> Result<Duration> {
    if config.fault.variant != FaultVariant::None {
        bail!(
            "[{table}] is the change under test: the run's fault.variant must be \"none\", not {:?}",
            config.fault.variant.name()
        );
    }
    let phases = config.schedule_params().phases;
    let warmup = phases
        .iter()
        .find(|p| p.name == "warmup")
        .map_or(0, |p| p.duration_ns);
    let measured = phases
        .iter()
        .find(|p| p.name == "measurement")
        .map_or(0, |p| p.duration_ns);
    let start_ns = (start_s / f64::from(factor) * 1e9) as u64;
    if start_ns >= measured {
        bail!(
            "[{table}] start_s = {start_s} begins after the measurement ({:.1} experiment seconds at this time factor): give a second inside it",
            measured as f64 / 1e9 * f64::from(factor)
        );
    }
    Ok(Duration::from_nanos(warmup + start_ns))
}

/// The recorder's epoch, once it has fixed it; `None` when the run ended first.
pub(super) fn await_epoch(
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> Option<std::time::Instant> {
    loop {
        if let Some(epoch) = inbox.epoch() {
            return Some(epoch);
        }
        if finished.load(Ordering::Relaxed) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs the rollout once the recorder has fixed its epoch (`after` it); `None` when the run
/// ended before the epoch was known.
pub(super) fn control(
    bed: &mut RealBed,
    rollout: &RolloutPlan,
    (after, drain_timeout): (Duration, Duration),
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> Option<(RolloutEnd, String)> {
    let epoch = await_epoch(inbox, finished)?;
    let times = RolloutTimes {
        begin: epoch + after,
        drain_timeout,
    };
    let end = roll(bed, rollout, times, inbox, finished);
    let state = end_state(bed);
    Some((end, state))
}

/// The declaration's lines on the rollout: how it ended, the testbed's state then as HAProxy
/// saw it, the teardown, and each step as the journal holds it (`steps`: seconds from the
/// epoch, subject and detail of each timeline event).
pub(super) fn words(
    rollout: &RolloutPlan,
    (replicas, steps): (usize, &[(f64, String)]),
    ended: Option<&(RolloutEnd, String)>,
    teardown: &str,
) -> String {
    let mut out = format!(
        "\n## The {}\n\n- change: {:?} replaced by {:?}, one replica at a time (start, ready, in service, drain, stop)\n",
        rollout.kind.name(),
        rollout.from,
        rollout.to
    );
    match ended {
        Some((end, state)) => {
            out.push_str(&format!("- outcome: {}\n", end.words(rollout, replicas)));
            out.push_str(&format!(
                "- state at its end (HAProxy's view, each process): {state}\n"
            ));
        }
        None => out.push_str("- outcome: not begun: the recording ended before its epoch\n"),
    }
    out.push_str(&format!("- teardown: {teardown}\n"));
    if !steps.is_empty() {
        out.push_str("\nEach step, as the journal's timeline holds it (s from the epoch):\n\n");
        for (at_s, what) in steps {
            out.push_str(&format!("- {at_s:.3} {what}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 10\n[calibration]\nlambda_max_rps = 20.0\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"mock\"\nreplicas = [\"replica-0\", \"replica-1\", \"replica-2\", \"replica-3\"]\nreplica_releases = { \"replica-0\" = \"a\", \"replica-1\" = \"a\", \"replica-2\" = \"b\", \"replica-3\" = \"b\" }\n[schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = 26.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n";

    fn plan(start_s: f64) -> RolloutPlan {
        RolloutPlan {
            kind: crate::realbed::rollout::RolloutKind::Rollout,
            from: "a".into(),
            to: "b".into(),
            command: vec!["serve".into(), "{port}".into()],
            start_s,
            drain_timeout_s: 30.0,
            measure_s: None,
        }
    }

    fn config(text: &str) -> Config {
        Config::parse(text.as_bytes()).unwrap()
    }

    /// The first step's time from the epoch is the warm-up (60 s / 10) plus `start_s / 10`;
    /// a run the rollout cannot be read from is refused before anything records, each by name.
    #[test]
    fn a_run_is_checked_against_its_rollout_before_it_records() {
        let after = check(&plan(60.0), 2, &config(RUN), 10).unwrap();
        assert_eq!(after, Duration::from_secs(12));
        for (text, start_s, words) in [
            (RUN.to_owned(), 300.0, "begins after the measurement (300.0 experiment seconds"),
            (
                RUN.replace("\"replica-3\" = \"b\"", "\"replica-3\" = \"a\""),
                60.0,
                "target.replica_releases must attribute each replica",
            ),
            (
                RUN.replace("rate_rps = 26.0\n", "").replace(
                    "variant = \"none\"",
                    "variant = \"degradation\"\nvictim = \"replica-1\"\ninjector = \"exec\"\nfire_command = [\"true\"]\nconfirm_address = \"127.0.0.1:9\"\nconfirm_path = \"/x\"\nconfirm_status = 503",
                ),
                60.0,
                "fault.variant must be \"none\"",
            ),
        ] {
            let why = match Config::parse(text.as_bytes()) {
                Ok(c) => format!("{:#}", check(&plan(start_s), 2, &c, 10).unwrap_err()),
                Err(e) => panic!("{words}: the configuration itself: {e}"),
            };
            assert!(why.contains(words), "{words}: {why}");
        }
    }
}
