//! The rollout controller on real parts (issue 56 item 1): a release is a replica command, and a
//! rollout replaces the testbed's replicas with another release's one at a time, under load.
//!
//! The testbed starts `replicas` replicas of the release it begins with (`[testbed.replica]`)
//! and declares as many more to HAProxy, out of service (`disabled`), each on a port of its own.
//! At its stated second the controller takes one step per replica, in order:
//!
//! 1. starts the new release's replica (`container-start`), and waits for its ready path (and
//!    its `weights_loaded_line`, `weight-load`);
//! 2. lets HAProxy check it while it takes no traffic (drain), and puts it in service through
//!    HAProxy's runtime socket once HAProxy's own health check has passed, waiting until it
//!    is UP;
//! 3. drains one replica of the old release (HAProxy sends it no new request) and waits until
//!    it has none in flight, at most `drain_timeout_s`;
//! 4. takes it out of service and stops its process group (SIGTERM).
//!
//! Each step is a `timeline` event, journaled on the recorder's clocks as it is seen. A new
//! replica that exits, never answers its ready path or is never counted UP stops the rollout
//! there (`restart-failed`), with the old release's remaining replicas still serving: a
//! controller that cannot start the candidate leaves the prior release in service, as a
//! deployment controller would. A rollback is the same controller with the releases the other
//! way round: the prior release's command replaces the candidate's.
//!
//! Nothing here measures: the requests' fates are the journal's, each attributed by HAProxy's
//! `x-upstream` to a replica and by `target.replica_releases` to its release.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::haproxy::{haproxy_ask, haproxy_do, parse_stat, server_stat, ServerStat};
use super::process::{answers, stop_group, Replica, WeightsLine};
use super::{RealBed, ReplicaPlan};
use crate::error::{bail, Result};
use percentes_formats::journal::change::{
    Change, DRAINED, DRAINING, DRAIN_TIMED_OUT, IN_SERVICE, READY, STOPPED,
};
use percentes_formats::journal::records::TimelineSubject;
use percentes_recorder::run::TimelineInbox;

/// The longest release name a rollout takes (as `target.replica_releases` does).
const RELEASE_NAME_BYTES_MAX: usize = 128;

/// How long HAProxy may take to count a ready replica UP: its check runs every 250 ms and one
/// success (rise 1) puts a server up, so seconds mean the proxy is not checking it.
const UP_WAIT: Duration = Duration::from_secs(10);

/// How often the controller looks at a replica or at HAProxy while it waits.
const LOOK: Duration = Duration::from_millis(20);

/// `[testbed.rollout]`: which release replaces which, with what command, and when.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RolloutPlan {
    /// `rollout` or `rollback`: what the scenario calls it. The controller does the same in
    /// both: it replaces `from` with `to`.
    pub kind: RolloutKind,
    /// The release the testbed starts with: `[testbed.replica] command` serves it.
    pub from: String,
    /// The release that replaces it, one replica at a time.
    pub to: String,
    /// The argv that serves one replica of `to`, as `[testbed.replica] command` (`{port}`,
    /// `{name}`, `{env:VAR}`); its ready path, start timeout and weights line are that table's.
    pub command: Vec<String>,
    /// Experiment seconds into the measurement at which the first step begins (divided by the
    /// time factor): the measurement before it is the old release's baseline.
    pub start_s: f64,
    /// Experiment seconds a draining replica may keep requests in flight before it is taken out
    /// anyway (divided by the time factor; default 30, the pinned client timeout, after which
    /// no request the client still waits for can be on it).
    #[serde(default = "client_timeout_s")]
    pub drain_timeout_s: f64,
    /// The measurement's length in real seconds under the dev profile (`dev.measure_s`, SPEC
    /// §P), for replicas that take longer to start than the scaled measurement lasts (a vLLM
    /// replica on half a CPU: about 90 s); absent, the pinned baseline after the time factor.
    #[serde(default)]
    pub measure_s: Option<f64>,
}

fn client_timeout_s() -> f64 {
    percentes_formats::pins::value::CLIENT_TIMEOUT_S as f64
}

/// What a scenario calls its release change.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub enum RolloutKind {
    /// A candidate release replaces the one in service.
    Rollout,
    /// The prior release replaces a candidate in service.
    Rollback,
}

impl RolloutKind {
    /// Its name in a scenario file and in words.
    pub fn name(self) -> &'static str {
        self.change().name()
    }

    /// The change its steps' details name (formats/JOURNAL.md).
    pub fn change(self) -> Change {
        match self {
            RolloutKind::Rollout => Change::Rollout,
            RolloutKind::Rollback => Change::Rollback,
        }
    }
}

impl RolloutPlan {
    /// Names and numbers in their domains, the command with its port.
    pub fn check(&self) -> Result<()> {
        for (key, release) in [("from", &self.from), ("to", &self.to)] {
            if release.trim().is_empty()
                || release.len() > RELEASE_NAME_BYTES_MAX
                || release.chars().any(char::is_control)
            {
                bail!("[testbed.rollout] {key} = {release:?} is not a release name: give 1-{RELEASE_NAME_BYTES_MAX} bytes of printable text");
            }
            // The steps' details hold it in parentheses, which the analyzer skips to read the
            // step (formats/JOURNAL.md "A testbed change's steps").
            if release.contains(['(', ')']) {
                bail!("[testbed.rollout] {key} = {release:?} holds a parenthesis: the journal's step details put a release in parentheses, so a release name may not hold one");
            }
        }
        if self.from == self.to {
            bail!(
                "[testbed.rollout] from and to are both {:?}: a rollout changes the release",
                self.from
            );
        }
        if !self.command.iter().any(|a| a.contains("{port}")) {
            bail!("[testbed.rollout] command never names {{port}}: each replica needs a port of its own");
        }
        for (key, v) in [
            ("start_s", self.start_s),
            ("drain_timeout_s", self.drain_timeout_s),
            ("measure_s", self.measure_s.unwrap_or(1.0)),
        ] {
            if !(v.is_finite() && (0.0..=3600.0).contains(&v)) {
                bail!("[testbed.rollout] {key} = {v} must lie in 0..=3600");
            }
        }
        Ok(())
    }

    /// The replica plan that serves `to`: `[testbed.replica]` with this table's command.
    pub fn serving(&self, base: &ReplicaPlan) -> ReplicaPlan {
        ReplicaPlan {
            command: self.command.clone(),
            ..base.clone()
        }
    }

    /// The release map a run's `target.replica_releases` must give for `replicas` replicas of
    /// `from` (`replica-0` ...) and as many of `to` after them.
    pub fn releases(&self, replicas: usize) -> Vec<(String, String)> {
        (0..2 * replicas)
            .map(|i| {
                let release = if i < replicas { &self.from } else { &self.to };
                (format!("replica-{i}"), release.clone())
            })
            .collect()
    }
}

/// The HAProxy line that declares a replica of the next release, out of service until the
/// controller puts it in.
pub fn standby_server_line(name: &str, port: u16) -> String {
    format!("    server {name} 127.0.0.1:{port} check disabled\n")
}

/// When the controller acts, in real time.
#[derive(Clone, Copy, Debug)]
pub struct RolloutTimes {
    /// The first step's start.
    pub begin: Instant,
    /// The longest a draining replica keeps the controller waiting.
    pub drain_timeout: Duration,
}

/// How a rollout ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RolloutEnd {
    /// Every replica serves the new release.
    Complete {
        /// Replicas replaced.
        replaced: usize,
    },
    /// A step failed; the replicas not yet replaced still serve the old release.
    Stopped {
        /// Replicas replaced before it.
        replaced: usize,
        /// What failed.
        why: String,
    },
    /// The run ended first.
    Unfinished {
        /// Replicas replaced before the run's end.
        replaced: usize,
    },
}

impl RolloutEnd {
    /// In words, for the scenario's declaration.
    pub fn words(&self, plan: &RolloutPlan, replicas: usize) -> String {
        let (kind, from, to) = (plan.kind.name(), &plan.from, &plan.to);
        match self {
            RolloutEnd::Complete { replaced } => {
                let tag = plan.kind.change().complete_tag();
                format!("{tag}{replaced} of {replicas} replicas replaced, {from:?} by {to:?}")
            }
            RolloutEnd::Stopped { replaced, why } => format!(
                "{kind} stopped after {replaced} of {replicas} replicas: {why}; the rest still serve {from:?}"
            ),
            RolloutEnd::Unfinished { replaced } => format!(
                "{kind} unfinished: the run ended after {replaced} of {replicas} replicas were replaced"
            ),
        }
    }
}

/// Why a step did not finish: it failed, or the run ended.
pub(super) enum Halt {
    Failed(String),
    RunEnded,
}

/// Runs the rollout on `bed` (started with as many standby servers as replicas): one step per
/// replica from `times.begin`, each reported into `inbox`; returns how it ended. `finished`
/// (the recording's end) stops it between looks.
pub fn roll(
    bed: &mut RealBed,
    plan: &RolloutPlan,
    times: RolloutTimes,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> RolloutEnd {
    while Instant::now() < times.begin {
        if finished.load(Ordering::Relaxed) {
            return RolloutEnd::Unfinished { replaced: 0 };
        }
        std::thread::sleep(LOOK.min(times.begin.saturating_duration_since(Instant::now())));
    }
    let count = bed.standby.len();
    for step in 0..count {
        match replace_one(bed, plan, step, times, inbox, finished) {
            Ok(()) => {}
            Err(Halt::RunEnded) => return RolloutEnd::Unfinished { replaced: step },
            Err(Halt::Failed(why)) => {
                inbox.report(
                    TimelineSubject::RestartFailed,
                    &format!(
                        "{}{why}; the {} stops here",
                        plan.kind.change().tag(Some((step + 1, count))),
                        plan.kind.name()
                    ),
                    None,
                );
                return RolloutEnd::Stopped {
                    replaced: step,
                    why,
                };
            }
        }
    }
    let end = RolloutEnd::Complete { replaced: count };
    inbox.report(TimelineSubject::Orchestrator, &end.words(plan, count), None);
    end
}

/// One step: `standby[step]` of `to` started, ready and in service, then `replica-step` of
/// `from` drained, out of service and stopped.
fn replace_one(
    bed: &mut RealBed,
    plan: &RolloutPlan,
    step: usize,
    times: RolloutTimes,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> std::result::Result<(), Halt> {
    let count = bed.standby.len();
    let (name, port) = bed.standby[step].clone();
    let old = bed.replicas[step].name.clone();
    let label = |what: &str| format!("{}{what}", plan.kind.change().tag(Some((step + 1, count))));
    let serving = plan.serving(&bed.plan);
    let log = bed.folder.join(format!("{name}.log"));
    let why = |e: crate::error::StudyError| {
        Halt::Failed(format!("{name} ({}) did not start: {e:#}", plan.to))
    };
    let index = start_replica(bed, &serving, (&name, port)).map_err(why)?;
    inbox.report(
        TimelineSubject::ContainerStart,
        &label(&format!(
            "{name} ({}) started, pid {}, port {port}",
            plan.to,
            bed.replicas[index].child.id()
        )),
        None,
    );
    await_ready(bed, index, &log, inbox, finished)?;
    inbox.report(
        TimelineSubject::Orchestrator,
        &label(&format!(
            "{name} ({}){READY}{} after {:.3} s",
            plan.to,
            bed.plan.ready_path,
            bed.replicas[index].started.elapsed().as_secs_f64()
        )),
        None,
    );
    put_in_service(bed, (&plan.to, &name), &label, inbox, finished)?;
    drain(
        bed,
        plan,
        (step, &old),
        times.drain_timeout,
        inbox,
        finished,
    )?;
    let began = Instant::now();
    stop_group(&mut bed.replicas[step].child, Duration::from_secs(10));
    inbox.report(
        TimelineSubject::Orchestrator,
        &label(&format!(
            "{old} ({}){STOPPED} (SIGTERM to its process group, gone in {:.3} s)",
            plan.from,
            began.elapsed().as_secs_f64()
        )),
        None,
    );
    Ok(())
}

/// Starts `name` on `port` from `serving`'s command as one more of the bed's replicas (HAProxy
/// keeps it out of service until told); its index among the bed's replicas.
pub(super) fn start_replica(
    bed: &mut RealBed,
    serving: &ReplicaPlan,
    (name, port): (&str, u16),
) -> Result<usize> {
    let child = RealBed::launch(
        serving,
        (name, port, None),
        &bed.folder,
        bed.placed.as_mut(),
    )?;
    bed.replicas.push(Replica {
        name: name.to_owned(),
        port,
        child,
        started: Instant::now(),
        netns: None,
    });
    Ok(bed.replicas.len() - 1)
}

/// Puts `name` (of `release`) in service: HAProxy checks it while it takes no traffic and it
/// takes traffic once HAProxy's own health check has passed; reported with `label`.
pub(super) fn put_in_service(
    bed: &RealBed,
    (release, name): (&str, &str),
    label: &dyn Fn(&str) -> String,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> std::result::Result<(), Halt> {
    // HAProxy does not check a server in maintenance, and one leaving maintenance for
    // "ready" takes traffic at once, before any check. Left for "drain" instead it is checked
    // but sent nothing; it goes in only once HAProxy's own check has passed.
    let socket = bed.folder.join("haproxy.sock");
    haproxy_do(&socket, &format!("set server replicas/{name} state drain"))
        .map_err(|e| Halt::Failed(format!("{e:#}")))?;
    await_proxy(&socket, name, ServerStat::check_passed, finished).map_err(|halt| {
        halt.or_failed(format!(
            "HAProxy's health check of {name} did not pass within {} s of its answering {}",
            UP_WAIT.as_secs(),
            bed.plan.ready_path
        ))
    })?;
    haproxy_do(&socket, &format!("set server replicas/{name} state ready"))
        .map_err(|e| Halt::Failed(format!("{e:#}")))?;
    let up = await_proxy(&socket, name, |s| s.status == "UP", finished).map_err(|halt| {
        halt.or_failed(format!(
            "HAProxy did not count {name} UP within {} s of putting it in service",
            UP_WAIT.as_secs()
        ))
    })?;
    inbox.report(
        TimelineSubject::Orchestrator,
        &label(&format!(
            "{IN_SERVICE}{name} ({release}) in service: UP, its last health check {}",
            up.check.trim_start_matches("* ")
        )),
        None,
    );
    Ok(())
}

/// A testbed change's lines for the declaration: its heading, what was planned, how it ended,
/// and each timeline event as the journal holds it (`steps`: seconds from the epoch and the
/// event).
pub(super) fn change_words(
    heading: &str,
    planned: &str,
    ended: &str,
    steps: &[(f64, String)],
) -> String {
    let mut out = format!("\n## {heading}\n\n- planned: {planned}\n- ended: {ended}\n");
    for (at_s, what) in steps {
        out.push_str(&format!("- {at_s:.3} s: {what}\n"));
    }
    out
}

/// Waits until HAProxy's view of server `name` satisfies `wanted` (at most [`UP_WAIT`]);
/// returns that view.
fn await_proxy(
    socket: &Path,
    name: &str,
    wanted: impl Fn(&ServerStat) -> bool,
    finished: &AtomicBool,
) -> std::result::Result<ServerStat, Halt> {
    let by = Instant::now() + UP_WAIT;
    loop {
        if let Some(stat) = server_stat(socket, name).filter(|s| wanted(s)) {
            return Ok(stat);
        }
        if finished.load(Ordering::Relaxed) {
            return Err(Halt::RunEnded);
        }
        if Instant::now() > by {
            return Err(Halt::Failed(String::new()));
        }
        std::thread::sleep(LOOK);
    }
}

impl Halt {
    /// A failure said in `words`; the run's end stays what it is.
    fn or_failed(self, words: String) -> Halt {
        match self {
            Halt::Failed(_) => Halt::Failed(words),
            Halt::RunEnded => Halt::RunEnded,
        }
    }
}

/// Waits for replica `index` to answer its ready path (and to print its weights line, reported
/// as `weight-load`); a replica that exits or outlasts the start timeout fails the step.
pub(super) fn await_ready(
    bed: &mut RealBed,
    index: usize,
    log: &Path,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> std::result::Result<(), Halt> {
    let plan = bed.plan.clone();
    let replica = &mut bed.replicas[index];
    let mut weights = WeightsLine::new(log, 0, plan.weights_loaded_line.as_deref());
    let deadline = replica.started + Duration::from_secs_f64(plan.start_timeout_s);
    loop {
        if finished.load(Ordering::Relaxed) {
            return Err(Halt::RunEnded);
        }
        weights.look(&replica.name, inbox);
        if let Ok(Some(status)) = replica.child.try_wait() {
            return Err(Halt::Failed(format!(
                "{} exited while starting ({status}); see {}",
                replica.name,
                log.display()
            )));
        }
        if weights.seen && answers(replica.address(), &plan.ready_path) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Halt::Failed(format!(
                "{} did not answer {} within {} s (start_timeout_s)",
                replica.name, plan.ready_path, plan.start_timeout_s
            )));
        }
        std::thread::sleep(LOOK);
    }
}

/// Drains `old` (replica `step`): HAProxy sends it no new request; waits until none is in
/// flight on it or `timeout`, then takes it out of service.
fn drain(
    bed: &RealBed,
    plan: &RolloutPlan,
    (step, old): (usize, &str),
    timeout: Duration,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> std::result::Result<(), Halt> {
    let count = bed.standby.len();
    let label = |what: &str| format!("{}{what}", plan.kind.change().tag(Some((step + 1, count))));
    let socket = bed.folder.join("haproxy.sock");
    haproxy_do(&socket, &format!("set server replicas/{old} state drain"))
        .map_err(|e| Halt::Failed(format!("{e:#}")))?;
    let began = Instant::now();
    let in_flight = server_stat(&socket, old).map_or(0, |s| s.in_flight);
    inbox.report(
        TimelineSubject::Orchestrator,
        &label(&format!(
            "{DRAINING}{old} ({}): no new request goes to it; {in_flight} in flight on it",
            plan.from
        )),
        None,
    );
    let left = loop {
        let left = server_stat(&socket, old).map_or(0, |s| s.in_flight);
        if left == 0 || began.elapsed() >= timeout {
            break left;
        }
        if finished.load(Ordering::Relaxed) {
            return Err(Halt::RunEnded);
        }
        std::thread::sleep(LOOK);
    };
    haproxy_do(&socket, &format!("set server replicas/{old} state maint"))
        .map_err(|e| Halt::Failed(format!("{e:#}")))?;
    let words = if left == 0 {
        format!(
            "{old}{DRAINED}{:.3} s: none in flight; HAProxy took it out of service",
            began.elapsed().as_secs_f64()
        )
    } else {
        format!(
            "{old}{DRAIN_TIMED_OUT}{left} in flight after the drain timeout ({:.3} s); HAProxy took it out of service anyway, and those requests end with it",
            timeout.as_secs_f64()
        )
    };
    inbox.report(TimelineSubject::Orchestrator, &label(&words), None);
    Ok(())
}

/// HAProxy's view of every server and whether each replica process still runs: the rollout's
/// end state, for the declaration.
pub fn end_state(bed: &mut RealBed) -> String {
    let socket = bed.folder.join("haproxy.sock");
    let stats = haproxy_ask(&socket, "show stat")
        .ok()
        .and_then(|text| parse_stat(&text).ok())
        .unwrap_or_default();
    let mut parts = Vec::new();
    for r in &mut bed.replicas {
        let running = matches!(r.child.try_wait(), Ok(None));
        let status = stats
            .get(&r.name)
            .map_or("not in HAProxy", |s| s.status.as_str());
        parts.push(format!(
            "{} {status} ({})",
            r.name,
            if running { "running" } else { "stopped" }
        ));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> RolloutPlan {
        toml::from_str(
            "kind = \"rollout\"\nfrom = \"stable\"\nto = \"candidate\"\ncommand = [\"serve\", \"{port}\", \"--max-num-seqs\", \"16\"]\nstart_s = 60.0\n",
        )
        .unwrap()
    }

    #[test]
    fn a_rollout_plan_reads_its_defaults_and_refuses_what_cannot_run() {
        let p = plan();
        p.check().unwrap();
        assert_eq!(p.kind, RolloutKind::Rollout);
        assert_eq!(p.drain_timeout_s, 30.0);
        assert_eq!(
            p.releases(2),
            [
                ("replica-0".to_owned(), "stable".to_owned()),
                ("replica-1".to_owned(), "stable".to_owned()),
                ("replica-2".to_owned(), "candidate".to_owned()),
                ("replica-3".to_owned(), "candidate".to_owned()),
            ]
        );
        for (bad, words) in [
            (
                RolloutPlan {
                    to: "stable".into(),
                    ..p.clone()
                },
                "a rollout changes the release",
            ),
            (
                RolloutPlan {
                    command: vec!["serve".into()],
                    ..p.clone()
                },
                "{port}",
            ),
            (
                RolloutPlan {
                    start_s: f64::NAN,
                    ..p.clone()
                },
                "start_s",
            ),
            (
                RolloutPlan {
                    measure_s: Some(-1.0),
                    ..p.clone()
                },
                "measure_s = -1 must lie in 0..=3600",
            ),
            (
                RolloutPlan {
                    from: "a\nb".into(),
                    ..p.clone()
                },
                "from = \"a\\nb\" is not a release name",
            ),
            (
                RolloutPlan {
                    to: "v2 (canary)".into(),
                    ..p.clone()
                },
                "to = \"v2 (canary)\" holds a parenthesis",
            ),
        ] {
            let why = bad.check().unwrap_err().to_string();
            assert!(why.contains(words), "{why}");
        }
        let unknown = toml::from_str::<RolloutPlan>(
            "kind = \"canary\"\nfrom = \"a\"\nto = \"b\"\ncommand = [\"{port}\"]\nstart_s = 1.0\n",
        )
        .unwrap_err()
        .to_string();
        assert!(unknown.contains("canary"), "{unknown}");
    }

    #[test]
    fn the_next_release_waits_out_of_service() {
        assert_eq!(
            standby_server_line("replica-2", 8103),
            "    server replica-2 127.0.0.1:8103 check disabled\n"
        );
    }

    #[test]
    fn how_a_rollout_ended_is_said_in_words() {
        let p = plan();
        assert_eq!(
            RolloutEnd::Complete { replaced: 2 }.words(&p, 2),
            "rollout complete: 2 of 2 replicas replaced, \"stable\" by \"candidate\""
        );
        let stopped = RolloutEnd::Stopped {
            replaced: 0,
            why: "replica-2 exited while starting".into(),
        }
        .words(&p, 2);
        assert!(
            stopped.starts_with("rollout stopped after 0 of 2")
                && stopped.ends_with("the rest still serve \"stable\""),
            "{stopped}"
        );
    }
}
