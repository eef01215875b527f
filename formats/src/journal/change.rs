//! A testbed change's steps as its controller journals them (formats/JOURNAL.md "A testbed
//! change's steps"): the rollout, the rollback, the scale-out and the proxy failover of the
//! real-parts testbed (SPEC §10) write `timeline` events whose details open with the change's
//! tag and hold one of a few phrases. The study runner writes them with the words here and the
//! analyzer reads them back through [`ChangeStep::read`], so neither matches the other's text;
//! the rest of a detail (pids, ports, seconds, a release's name) is free text for people.
//!
//! The grammar, from the journals the campaigns of 2026-12-06 wrote (each is read back in the
//! tests below):
//!
//! - tag: `proxy failover: `, `scale-out: `, `scale-out complete: `, `rollout step I of N: `,
//!   `rollout complete: ` (and the same with `rollback`); a `weight-load` event has no tag: its
//!   detail is `<replica>'s log: <line>`.
//! - step, by subject and phrase: `container-start` is a start (a replica's, the replica's name
//!   first; the proxy's, [`PROXY_STARTED`]); `restart-failed` is the change's failure; an
//!   `orchestrator` note opens with [`DECIDED`] (the replica's name after it), [`PROXY_UP`],
//!   [`IN_SERVICE`] or [`DRAINING`], or is a name (the replica's, or `HAProxy`), a
//!   parenthesis it may carry (a release, a pid), then [`PROXY_KILLED`], [`STOPPED`],
//!   [`DRAINED`], [`DRAIN_TIMED_OUT`] or [`READY`]; or it is its tag's `complete`.

use super::records::TimelineSubject;

/// What the testbed changed (SPEC §10 "Rollouts", "Proxy failover", "Scale-out").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Replicas of one release replaced, one at a time, by another.
    Rollout,
    /// A rollout back to the prior release.
    Rollback,
    /// One more replica started and put in service.
    ScaleOut,
    /// The proxy killed and started again.
    ProxyFailover,
}

impl Change {
    /// Every change.
    pub const ALL: [Change; 4] = [
        Change::Rollout,
        Change::Rollback,
        Change::ScaleOut,
        Change::ProxyFailover,
    ];

    /// Its name, as a detail's tag spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Change::Rollout => "rollout",
            Change::Rollback => "rollback",
            Change::ScaleOut => "scale-out",
            Change::ProxyFailover => "proxy failover",
        }
    }

    /// The tag a step's detail opens with where the step has no number: `scale-out: `.
    pub const fn prefix(self) -> &'static str {
        match self {
            Change::Rollout => "rollout: ",
            Change::Rollback => "rollback: ",
            Change::ScaleOut => "scale-out: ",
            Change::ProxyFailover => "proxy failover: ",
        }
    }

    /// The tag a step's detail opens with: [`Change::prefix`], or for a rollout's or
    /// rollback's step `rollout step I of N: ` (`step`: I counted from 1, and N).
    pub fn tag(self, step: Option<(usize, usize)>) -> String {
        match step {
            Some((i, n)) => format!("{} step {i} of {n}: ", self.name()),
            None => self.prefix().to_owned(),
        }
    }

    /// The tag of the note that says the change completed: `scale-out complete: `.
    pub fn complete_tag(self) -> String {
        format!("{} {COMPLETE}: ", self.name())
    }
}

/// A scale-out's decision: `decided to start <replica>`.
pub const DECIDED: &str = "decided to start ";
/// The proxy's kill: `HAProxy (pid P) killed with SIGKILL, ...`.
pub const PROXY_KILLED: &str = " killed with SIGKILL";
/// The proxy's new process (`container-start`): `HAProxy started again (pid P), ...`.
pub const PROXY_STARTED: &str = "HAProxy started again";
/// The new proxy counting every replica up: `the new HAProxy counts N of N replicas UP, ...`.
pub const PROXY_UP: &str = "the new HAProxy counts ";
/// A replica's first ready answer: `<replica> ... answers <path> after S s`.
pub const READY: &str = " answers ";
/// The proxy putting a replica in service: `HAProxy put <replica> (<release>) in service: ...`.
pub const IN_SERVICE: &str = "HAProxy put ";
/// A drain's start: `HAProxy drains <replica> (<release>): ...`.
pub const DRAINING: &str = "HAProxy drains ";
/// A drain's end, none left in flight: `<replica> drained in S s: ...`.
pub const DRAINED: &str = " drained in ";
/// A drain's end at its timeout: `<replica> still had N in flight after the drain timeout ...`.
pub const DRAIN_TIMED_OUT: &str = " still had ";
/// An old replica's end: `<replica> (<release>) out of service and stopped (...)`.
pub const STOPPED: &str = " out of service and stopped";
/// The word after a change's name in the note that says it completed.
pub const COMPLETE: &str = "complete";

/// One step of a change, as the journal's `timeline` events hold it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A scale-out decided.
    Decided,
    /// A replica's process started (`container-start`).
    Started,
    /// A replica's weights-loaded log line (`weight-load`).
    WeightsLoaded,
    /// A replica's first ready answer.
    Ready,
    /// The proxy put a replica in service once its own check passed.
    InService,
    /// The proxy stopped sending a replica new requests.
    Draining,
    /// A drained replica left service (none in flight, or the drain timed out).
    Drained,
    /// A replica taken out of service and its process stopped.
    Stopped,
    /// The proxy killed.
    ProxyKilled,
    /// The proxy's new process started (`container-start`).
    ProxyStarted,
    /// The new proxy counts every replica up.
    ProxyUp,
    /// The change completed.
    Complete,
    /// The change failed (`restart-failed`).
    Failed,
}

impl Step {
    /// Its name in a report.
    pub const fn name(self) -> &'static str {
        match self {
            Step::Decided => "decided",
            Step::Started => "process started",
            Step::WeightsLoaded => "weights loaded",
            Step::Ready => "ready",
            Step::InService => "in service",
            Step::Draining => "draining",
            Step::Drained => "drained",
            Step::Stopped => "stopped",
            Step::ProxyKilled => "proxy killed",
            Step::ProxyStarted => "proxy started",
            Step::ProxyUp => "every replica up",
            Step::Complete => "complete",
            Step::Failed => "failed",
        }
    }
}

/// One `timeline` event read as a change's step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeStep {
    /// The change its tag names; `None` for a `weight-load` line, which belongs to the change
    /// that started its replica.
    pub change: Option<Change>,
    /// A rollout's or rollback's step (I from 1, and N), where the tag numbers it.
    pub number: Option<(u32, u32)>,
    /// What happened.
    pub step: Step,
    /// The replica it happened to, where the step names one.
    pub replica: Option<String>,
}

impl ChangeStep {
    /// The step a `timeline` event of `subject` with `detail` is, if it is one (an event
    /// another controller journaled, an outside orchestrator's, or a partition watcher's
    /// verdict is not).
    pub fn read(subject: TimelineSubject, detail: &str) -> Option<ChangeStep> {
        if subject == TimelineSubject::WeightLoad {
            let (replica, _) = detail.split_once("'s log: ")?;
            return Some(ChangeStep {
                change: None,
                number: None,
                step: Step::WeightsLoaded,
                replica: Some(replica.to_owned()).filter(|r| !r.contains(' ')),
            });
        }
        let (change, number, rest) = tag(detail)?;
        let rest = match rest {
            Rest::Complete => {
                return Some(ChangeStep {
                    change: Some(change),
                    number,
                    step: Step::Complete,
                    replica: None,
                })
            }
            Rest::Step(rest) => rest,
        };
        let (step, replica) = match subject {
            TimelineSubject::RestartFailed => (Step::Failed, None),
            TimelineSubject::ContainerStart if rest.starts_with(PROXY_STARTED) => {
                (Step::ProxyStarted, None)
            }
            TimelineSubject::ContainerStart => (Step::Started, first_name(rest)),
            TimelineSubject::Orchestrator => orchestrator_step(rest)?,
            _ => return None,
        };
        Some(ChangeStep {
            change: Some(change),
            number,
            step,
            replica,
        })
    }
}

/// The first word of `words`, up to a space, a comma or a colon: a replica's name.
fn first_name(words: &str) -> Option<String> {
    words
        .split([' ', ',', ':'])
        .next()
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
}

/// The step an `orchestrator` note's words after the tag say, and the replica they name.
fn orchestrator_step(rest: &str) -> Option<(Step, Option<String>)> {
    let after = |phrase: &str| rest.strip_prefix(phrase).and_then(first_name);
    for (phrase, step) in [
        (DECIDED, Step::Decided),
        (IN_SERVICE, Step::InService),
        (DRAINING, Step::Draining),
    ] {
        if rest.starts_with(phrase) {
            return Some((step, after(phrase)));
        }
    }
    if rest.starts_with(PROXY_UP) {
        return Some((Step::ProxyUp, None));
    }
    // `<replica> (<release>) <phrase>` or `HAProxy (pid P) <phrase>`: the phrase follows the
    // name and what its parenthesis holds.
    let name = first_name(rest);
    let tail = skip_parenthesis(&rest[name.as_ref().map_or(0, String::len)..]);
    let step = [
        (PROXY_KILLED, Step::ProxyKilled),
        (STOPPED, Step::Stopped),
        (DRAINED, Step::Drained),
        (DRAIN_TIMED_OUT, Step::Drained),
        (READY, Step::Ready),
    ]
    .into_iter()
    .find(|(phrase, _)| tail.starts_with(phrase))?
    .1;
    Some((step, name.filter(|_| step != Step::ProxyKilled)))
}

/// `text` past a parenthesis it opens with (` (max-num-seqs 16) answers` -> ` answers`); `text`
/// itself when it opens with none. A release name holds no parenthesis (the runner refuses
/// one), so the first `)` closes it.
fn skip_parenthesis(text: &str) -> &str {
    match text.strip_prefix(" (").and_then(|t| t.split_once(')')) {
        Some((_, past)) => past,
        None => text,
    }
}

/// What follows a detail's tag.
#[derive(Clone, Copy)]
enum Rest<'a> {
    /// A step's words.
    Step(&'a str),
    /// The change's `complete` note.
    Complete,
}

/// A detail's tag read: the change it names, the step number it gives, and what follows it.
type Tagged<'a> = (Change, Option<(u32, u32)>, Rest<'a>);

/// The tag `detail` opens with, if it opens with one.
fn tag(detail: &str) -> Option<Tagged<'_>> {
    Change::ALL.into_iter().find_map(|change| {
        let rest = detail.strip_prefix(change.name())?;
        if rest.starts_with(&format!(" {COMPLETE}: ")) {
            return Some((change, None, Rest::Complete));
        }
        if let Some(rest) = rest.strip_prefix(": ") {
            return Some((change, None, Rest::Step(rest)));
        }
        let rest = rest.strip_prefix(" step ")?;
        let (i, rest) = rest.split_once(" of ")?;
        let (n, rest) = rest.split_once(": ")?;
        let number = (i.parse().ok()?, n.parse().ok()?);
        Some((change, Some(number), Rest::Step(rest)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use TimelineSubject::{ContainerStart, Orchestrator, RestartFailed, WeightLoad};

    fn step(subject: TimelineSubject, detail: &str) -> (Option<Change>, Step, Option<String>) {
        let read = ChangeStep::read(subject, detail).expect(detail);
        (read.change, read.step, read.replica)
    }

    fn named(name: &str) -> Option<String> {
        Some(name.to_owned())
    }

    /// The details the proxy-failover campaign's first run journaled
    /// (studies/proxy-failover-vllm/failover-1, `percentes inspect --kind event`).
    #[test]
    fn a_proxy_failovers_journaled_steps_read_back() {
        let fo = Some(Change::ProxyFailover);
        assert_eq!(
            step(Orchestrator, "proxy failover: HAProxy (pid 3635) killed with SIGKILL, requests in flight through it by replica: replica-0 15, replica-1 15"),
            (fo, Step::ProxyKilled, None)
        );
        assert_eq!(
            step(ContainerStart, "proxy failover: HAProxy started again (pid 4417), the same configuration on the same port, 5.006 s after the kill"),
            (fo, Step::ProxyStarted, None)
        );
        assert_eq!(
            step(
                Orchestrator,
                "proxy failover: the new HAProxy counts 2 of 2 replicas UP, 0.189 s after its start"
            ),
            (fo, Step::ProxyUp, None)
        );
        assert_eq!(
            step(
                RestartFailed,
                "proxy failover: HAProxy did not start again: no such file"
            ),
            (fo, Step::Failed, None)
        );
    }

    /// The details studies/scale-out-vllm/scale-out-1 journaled.
    #[test]
    fn a_scale_outs_journaled_steps_read_back() {
        let so = Some(Change::ScaleOut);
        assert_eq!(
            step(Orchestrator, "scale-out: decided to start replica-1"),
            (so, Step::Decided, named("replica-1"))
        );
        assert_eq!(
            step(
                ContainerStart,
                "scale-out: replica-1 started, pid 7726, port 35525"
            ),
            (so, Step::Started, named("replica-1"))
        );
        assert_eq!(
            step(WeightLoad, "replica-1's log: (Worker pid=7755) INFO 12-06 23:30:06 [default_loader.py:501] Loading weights took 0.01 seconds"),
            (None, Step::WeightsLoaded, named("replica-1"))
        );
        assert_eq!(
            step(
                Orchestrator,
                "scale-out: replica-1 answers /health after 57.929 s"
            ),
            (so, Step::Ready, named("replica-1"))
        );
        assert_eq!(
            step(Orchestrator, "scale-out: HAProxy put replica-1 (the same release) in service: UP, its last health check L7OK"),
            (so, Step::InService, named("replica-1"))
        );
        assert_eq!(
            step(
                Orchestrator,
                "scale-out complete: replica-1 in service 58.151 s after the decision"
            ),
            (so, Step::Complete, None)
        );
    }

    /// The details studies/load-under-rollout-vllm/load-under-rollout-1 journaled, and a
    /// rollback's and a drain timeout's in the runner's words.
    #[test]
    fn a_rollouts_journaled_steps_read_back_with_their_numbers() {
        let ro = Some(Change::Rollout);
        let read = ChangeStep::read(
            ContainerStart,
            "rollout step 1 of 2: replica-2 (max-num-seqs 16) started, pid 4475, port 38909",
        )
        .unwrap();
        assert_eq!(read.number, Some((1, 2)));
        assert_eq!(
            (read.change, read.step, read.replica),
            (ro, Step::Started, named("replica-2"))
        );
        for (detail, want, replica) in [
            ("rollout step 1 of 2: replica-2 (max-num-seqs 16) answers /health after 105.269 s", Step::Ready, "replica-2"),
            ("rollout step 1 of 2: HAProxy put replica-2 (max-num-seqs 16) in service: UP, its last health check L7OK", Step::InService, "replica-2"),
            ("rollout step 1 of 2: HAProxy drains replica-0 (max-num-seqs 64): no new request goes to it; 67 in flight on it", Step::Draining, "replica-0"),
            ("rollout step 1 of 2: replica-0 drained in 1.473 s: none in flight; HAProxy took it out of service", Step::Drained, "replica-0"),
            ("rollout step 2 of 2: replica-1 still had 3 in flight after the drain timeout (6.000 s); HAProxy took it out of service anyway, and those requests end with it", Step::Drained, "replica-1"),
            ("rollout step 1 of 2: replica-0 (max-num-seqs 64) out of service and stopped (SIGTERM to its process group, gone in 2.305 s)", Step::Stopped, "replica-0"),
        ] {
            assert_eq!(step(Orchestrator, detail), (ro, want, named(replica)), "{detail}");
        }
        assert_eq!(
            step(Orchestrator, "rollout complete: 2 of 2 replicas replaced, \"max-num-seqs 64\" by \"max-num-seqs 16\""),
            (ro, Step::Complete, None)
        );
        assert_eq!(
            step(RestartFailed, "rollback step 2 of 2: replica-3 (stable) did not start: exited; the rollback stops here"),
            (Some(Change::Rollback), Step::Failed, None)
        );
    }

    /// A release named with a step's phrase does not change the step read: the phrase is read
    /// past the release's parentheses.
    #[test]
    fn a_release_that_holds_a_phrase_is_skipped() {
        let ro = Some(Change::Rollout);
        assert_eq!(
            step(Orchestrator, "rollout step 1 of 2: replica-2 (out of service and stopped answers) answers /health after 3.000 s"),
            (ro, Step::Ready, named("replica-2"))
        );
        assert_eq!(
            step(Orchestrator, "rollout step 1 of 2: replica-0 (answers drained in) out of service and stopped (SIGTERM)"),
            (ro, Step::Stopped, named("replica-0"))
        );
    }

    /// What is not a change's step reads as none: a partition watcher's verdict, an outside
    /// orchestrator's note, a tag without a known phrase, a malformed step number.
    #[test]
    fn other_timeline_events_are_no_step() {
        for (subject, detail) in [
            (
                TimelineSubject::Detected,
                "HAProxy marked replica-1 DOWN (its health check failed twice)",
            ),
            (
                Orchestrator,
                "HAProxy marked replica-1 UP (its health check passes) and routes to it again",
            ),
            (Orchestrator, "scale-out: thinking about it"),
            (
                Orchestrator,
                "rollout step x of 2: replica-2 answers /health",
            ),
            (
                ContainerStart,
                "replica-3 started (external: stated no time)",
            ),
            (WeightLoad, "weights loaded"),
        ] {
            assert_eq!(ChangeStep::read(subject, detail), None, "{detail}");
        }
    }

    /// What the runner writes with these words reads back as the step it means.
    #[test]
    fn the_tags_the_runner_writes_read_back() {
        for change in Change::ALL {
            let detail = format!("{}{DECIDED}replica-4", change.tag(None));
            assert_eq!(
                step(Orchestrator, &detail),
                (Some(change), Step::Decided, named("replica-4"))
            );
            let detail = format!("{}{IN_SERVICE}replica-4 (new)", change.tag(Some((3, 4))));
            let read = ChangeStep::read(Orchestrator, &detail).unwrap();
            assert_eq!((read.number, read.step), (Some((3, 4)), Step::InService));
            let detail = format!("{}replica-4 in service", change.complete_tag());
            assert_eq!(step(Orchestrator, &detail).1, Step::Complete);
        }
    }
}
